package testenv

import (
	"net/http"
	"testing"
	"time"
)

func TestConsulAgentRestart(t *testing.T) {
	t.Parallel()
	a := StartConsul(t)
	client := &http.Client{Timeout: 2 * time.Second}
	if err := a.probe(client); err != nil {
		t.Fatalf("fresh agent not answering: %v", err)
	}
	a.Restart(t)
	if err := a.probe(client); err != nil {
		t.Fatalf("restarted agent not answering: %v", err)
	}
	var leader string
	if err := getJSON(client, "http://"+a.Addr()+"/v1/status/leader", &leader); err != nil || leader == "" {
		t.Fatalf("leader after restart = %q, %v", leader, err)
	}
	a.Stop()
	if err := a.probe(client); err == nil {
		t.Fatal("stopped agent still answers")
	}
	a.Stop() // idempotent
}

func TestFreePortsDistinct(t *testing.T) {
	ports := FreePorts(t, 8)
	lo, hi := portRange()
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: bad or duplicate %d", ports, p)
		}
		if hi > lo && (p < lo || p >= hi) {
			t.Errorf("port %d is outside [%d, %d), the range outside the kernel's ephemeral ports", p, lo, hi)
		}
		seen[p] = true
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePathOf(root + "/go.mod"); got != modulePath {
		t.Fatalf("RepoRoot %s has module %q", root, got)
	}
}

package systemtest

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// exitCode is a CLI run's exit status (0 for no error, -1 if it did not
// exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// The approve CLI with several waiting executions: no id lists them and
// exits 2 (nothing decided); several ids are each decided and reported;
// --all declines the rest with the reason; --all with nothing waiting
// says so; an id decided already fails (exit 1) naming it.
func TestCLIApproveSeveralAndAll(t *testing.T) {
	bin := testcluster.Binary(t)
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	flags := []string{"--grpc", info.GRPCAddr, "--token-file", tokenFile(t, bobToken)}
	cli := func(args ...string) (string, int) {
		t.Helper()
		out, err := mcpgrainCLI(t, bin, append(args, flags...)...)
		return out, exitCode(err)
	}
	a, b, c := pause(t, cs, "waiting_for_interaction"), pause(t, cs, "waiting_for_interaction"), pause(t, cs, "waiting_for_interaction")

	out, code := cli("approve", "accept")
	if code != 2 || !strings.Contains(out, "needs execution ids (or --all)") || !strings.Contains(out, a) || !strings.Contains(out, b) || !strings.Contains(out, c) {
		t.Fatalf("accept without ids: exit %d\n%s", code, out)
	}
	out, code = cli("approve", "accept", a, b)
	if code != 0 || !strings.Contains(out, a+": accepted\n") || !strings.Contains(out, b+": accepted\n") {
		t.Fatalf("accept a b: exit %d\n%s", code, out)
	}
	out, code = cli("approve", "decline", "--all", "--reason", "one at a time")
	if code != 0 || strings.TrimSpace(out) != c+": declined" {
		t.Fatalf("decline --all: exit %d\n%s", code, out)
	}
	out, code = cli("approve", "accept", "--all")
	if code != 0 || strings.TrimSpace(out) != "no paused executions" {
		t.Fatalf("accept --all with nothing waiting: exit %d\n%s", code, out)
	}
	out, code = cli("approve", "accept", a)
	if code != 1 || !strings.Contains(out, a+":") || !strings.Contains(out, "already decided") {
		t.Fatalf("accept a decided one: exit %d\n%s", code, out)
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 2 {
		t.Fatalf("todos %v, want the two accepted", got)
	}
}

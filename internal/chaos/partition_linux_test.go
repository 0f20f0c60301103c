package chaos_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// netLab is a bridge with one network namespace per node, built by the
// test itself with iproute2 (no Docker): node i lives in its own
// namespace at 10.X.Y.(10+i), the test process reaches every node through
// the bridge at 10.X.Y.1, and cutting node i's link partitions it.
type netLab struct {
	t      *testing.T
	tag    string
	prefix string // "10.X.Y."
	bridge string
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newNetLab(t *testing.T, nodes int) *netLab {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 (ip) not installed")
	}
	l := &netLab{t: t, tag: fmt.Sprintf("%04x", rand.IntN(1<<16)),
		prefix: fmt.Sprintf("10.%d.%d.", 100+rand.IntN(100), rand.IntN(250))}
	l.bridge = "mgbr" + l.tag
	t.Cleanup(l.teardown)
	ipCmd(t, "link", "add", l.bridge, "type", "bridge")
	ipCmd(t, "addr", "add", l.prefix+"1/24", "dev", l.bridge)
	ipCmd(t, "link", "set", l.bridge, "up")
	for i := range nodes {
		ns, host, peer := l.ns(i), l.hostIf(i), fmt.Sprintf("mg%sn%d", l.tag, i)
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", peer)
		ipCmd(t, "link", "set", peer, "netns", ns)
		ipCmd(t, "link", "set", host, "master", l.bridge)
		ipCmd(t, "link", "set", host, "up")
		ipCmd(t, "netns", "exec", ns, "ip", "addr", "add", l.host(i)+"/24", "dev", peer)
		ipCmd(t, "netns", "exec", ns, "ip", "link", "set", peer, "up")
		ipCmd(t, "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	}
	return l
}

func (l *netLab) ns(i int) string     { return fmt.Sprintf("mg%s-%d", l.tag, i) }
func (l *netLab) hostIf(i int) string { return fmt.Sprintf("mg%sh%d", l.tag, i) }
func (l *netLab) host(i int) string   { return fmt.Sprintf("%s%d", l.prefix, 10+i) }
func (l *netLab) gateway() string     { return l.prefix + "1" }

// cut and heal take node i's link down and up: it can reach nothing
// (peers, Consul, Postgres) and nothing can reach it.
func (l *netLab) cut(i int)  { ipCmd(l.t, "link", "set", l.hostIf(i), "down") }
func (l *netLab) heal(i int) { ipCmd(l.t, "link", "set", l.hostIf(i), "up") }

func (l *netLab) teardown() {
	for i := range 8 {
		_ = exec.Command("ip", "netns", "del", l.ns(i)).Run()
	}
	_ = exec.Command("ip", "link", "del", l.bridge).Run()
}

// proxy forwards connections accepted on the bridge address to target (a
// loopback service of the host: Consul, Postgres).
func proxy(t *testing.T, listenHost, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listenHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

// insideNS runs curl in node i's namespace: the view of a client that is
// cut off together with the node.
func (l *netLab) insideNS(i int, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.ns(i), "curl", "-s", "-m", "5"}, args...)...).CombinedOutput()
	return string(out), err
}

// TestPartitionedNodeStopsServingItsGrains: a node cut off from its peers,
// Consul and Postgres (its own network namespace, link down) must stop
// serving its grains — it loses membership and its epochs are superseded —
// while the others take them over; after healing, every acknowledged
// write is there exactly once and no identity had two writing owners.
func TestPartitionedNodeStopsServingItsGrains(t *testing.T) {
	if os.Getenv("MCPGRAIN_CHAOS") != "1" {
		t.Skip("partition test: set MCPGRAIN_CHAOS=1 (it creates network namespaces and a bridge)")
	}
	lab := newNetLab(t, 3)
	var once sync.Once
	var consulP, dsnP string
	c := testcluster.Start(t, testcluster.Options{
		Nodes: 3,
		Hosts: []string{lab.host(0), lab.host(1), lab.host(2)},
		Wrap:  func(i int) []string { return []string{"ip", "netns", "exec", lab.ns(i)} },
		Rewrite: func(consulAddr, dsn string) (string, string) {
			once.Do(func() {
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatal(err)
				}
				consulP = proxy(t, lab.gateway(), consulAddr)
				u.Host = proxy(t, lab.gateway(), u.Host)
				dsnP = u.String()
			})
			return consulP, dsnP
		},
	})
	rec := &recorder{acks: map[string][]chaos.Ack{}, unknown: map[string]int{}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var cutOff atomic.Int32
	cutOff.Store(-1)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := rand.IntN(3)
				if int(cutOff.Load()) == i {
					continue
				}
				id := fmt.Sprintf("part-%d", rand.IntN(60))
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				r, err := c.Node(i).Probe(pctx, id, 1)
				cancel()
				rec.mu.Lock()
				switch {
				case err == nil:
					rec.acks[id] = append(rec.acks[id], chaos.Ack{Count: r.Count, Epoch: r.Epoch, Node: r.Node})
				case r.Status == 0 || r.Status == 504:
					rec.unknown[id]++
				default:
					rec.outcomes = append(rec.outcomes, chaos.Outcome{What: fmt.Sprintf("probe %s via %s: %d", id, c.Node(i).ID, r.Status), Err: err.Error(), Retryable: r.Retryable})
				}
				rec.mu.Unlock()
				_ = w
			}
		}()
	}
	time.Sleep(2 * time.Second)

	// Cut n3 off. Its grains move to the others.
	victim := 2
	cutOff.Store(int32(victim))
	began := time.Now()
	lab.cut(victim)
	c.WaitMembersOn([]int{0, 1}, 2, 30*time.Second)
	t.Logf("survivors saw %s leave after %s", c.Node(victim).ID, time.Since(began).Round(time.Millisecond))
	// Inside its namespace, the cut-off node refuses to serve: it lost its
	// membership lease (and cannot reach the store), so no write of it can
	// be acknowledged, even for grains it owned.
	deadline := time.Now().Add(15 * time.Second)
	for {
		id := fmt.Sprintf("part-%d", rand.IntN(60))
		out, err := lab.insideNS(victim, "-X", "POST", "-H", "Authorization: Bearer "+testcluster.Token, fmt.Sprintf("http://%s/debug/probe/%s?delta=1", c.Node(victim).HTTP, id))
		if err != nil {
			t.Fatalf("curl in %s: %v %s", lab.ns(victim), err, out)
		}
		// Not acknowledged, but its write may still reach the store when
		// the link heals (bytes already in a socket buffer); fencing
		// rejects it if another activation took the grain meanwhile.
		rec.mu.Lock()
		rec.unknown[id]++
		rec.mu.Unlock()
		if !strings.Contains(out, `"count"`) {
			t.Logf("cut-off node answers: %s", strings.TrimSpace(out))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off node still acknowledges writes 15s after the cut: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)

	// Heal: it rejoins.
	lab.heal(victim)
	cutOff.Store(-1)
	c.WaitMembers(3, 60*time.Second)
	if v, _ := c.Node(victim).Metric("mcpgrain_cluster_membership_lapses_total"); v < 1 {
		t.Errorf("the cut-off node did not report a membership lapse")
	}
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	var violations []string
	rec.mu.Lock()
	defer rec.mu.Unlock()
	total := 0
	for id, acks := range rec.acks {
		total += len(acks)
		violations = append(violations, chaos.SingleOwner(id, acks)...)
		var final testcluster.ProbeResult
		var err error
		for attempt := range 20 {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			final, err = c.Node(attempt%3).Probe(fctx, id, 0)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			violations = append(violations, fmt.Sprintf("%s unreadable after healing: %v", id, err))
			continue
		}
		if v := chaos.Counter(id, final.Count, len(acks), rec.unknown[id]); len(v) > 0 {
			violations = append(violations, v...)
			for _, o := range rec.outcomes {
				if strings.HasPrefix(o.What, "probe "+id+" ") {
					t.Logf("%s: %s", o.What, o.Err)
				}
			}
		}
	}
	t.Logf("partition: %d writes acknowledged over %d identities; violations %d", total, len(rec.acks), len(violations))
	for _, v := range violations {
		t.Error(v)
	}
}

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

const (
	reminderGrains    = 1000
	remindersPerGrain = 10
)

type reminderKey struct {
	grain, name string
}

// registerReminders makes reminderGrains probe grains each register
// remindersPerGrain one-shot reminders, due spread evenly over [start,
// start+window). It returns each reminder's due time.
// registrationLead is how long before the first due time the tests start
// registering their 10,000 reminders: about 4 s on a quiet 2-core
// machine, and past 8 s (the lead it had) with the CPU oversubscribed 2×
// in CI's oversubscribed pass; registerReminders logs what it took.
const registrationLead = 20 * time.Second

func registerReminders(t *testing.T, c *testcluster.Cluster, start time.Time, window time.Duration) map[reminderKey]time.Time {
	t.Helper()
	began := time.Now()
	due := map[reminderKey]time.Time{}
	total := reminderGrains * remindersPerGrain
	specs := make([][]testcluster.ReminderSpec, reminderGrains)
	for i := range total {
		g, name := i%reminderGrains, fmt.Sprintf("r%d", i/reminderGrains)
		at := start.Add(window * time.Duration(i) / time.Duration(total))
		specs[g] = append(specs[g], testcluster.ReminderSpec{Name: name, DueAtMs: at.UnixMilli()})
		due[reminderKey{fmt.Sprintf("rem-%d", g), name}] = time.UnixMilli(at.UnixMilli())
	}
	var wg sync.WaitGroup
	errs := make(chan error, reminderGrains)
	sem := make(chan struct{}, 16)
	for g := range reminderGrains {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := c.Node(g%3).Remind(ctx, fmt.Sprintf("rem-%d", g), specs[g]); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("registering %d reminders took %s (lead %s)", total, time.Since(began).Round(time.Millisecond), registrationLead)
	if time.Now().After(start) {
		t.Fatalf("registering %d reminders took past the first due time; raise the lead time", total)
	}
	return due
}

// fires reads every probe grain's durable record of received reminders.
func fires(t *testing.T, st store.Store) map[reminderKey][]*pb.ProbeFire {
	t.Helper()
	out := map[reminderKey][]*pb.ProbeFire{}
	for g := range reminderGrains {
		id := fmt.Sprintf("rem-%d", g)
		o, err := st.Load(context.Background(), "probe/"+id)
		if err != nil {
			t.Fatal(err)
		}
		var rec pb.ProbeRecord
		if err := proto.Unmarshal(o.Record, &rec); err != nil {
			t.Fatal(err)
		}
		for _, f := range rec.GetFires() {
			k := reminderKey{id, f.GetName()}
			out[k] = append(out[k], f)
		}
	}
	return out
}

// awaitAllFired waits until every reminder fired at least once.
func awaitAllFired(t *testing.T, st store.Store, want int, until time.Time) map[reminderKey][]*pb.ProbeFire {
	t.Helper()
	for {
		f := fires(t, st)
		if len(f) == want {
			return f
		}
		if time.Now().After(until) {
			t.Fatalf("%d of %d reminders fired", len(f), want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func openTestStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// skipUnderRace skips the 10,000-reminder scenarios when the node processes
// are race-built: they measure delivery timing (lateness bounds, exactly
// once in the steady state), which race-built nodes on 2 shared cores do
// not meet; the same scenarios run in the plain integration tier.
func skipUnderRace(t *testing.T) {
	if os.Getenv("MCPGRAIN_TEST_RACE") == "1" {
		t.Skip("timing scenario: runs with plain-built nodes (MCPGRAIN_TEST_RACE=1 builds them with -race)")
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[int(p*float64(len(ds)-1))]
}

// 10,000 reminders due over 10 s fire exactly once each, never early, and
// wake grains that passivated after registering them.
func TestRemindersFireExactlyOnceAcrossProcesses(t *testing.T) {
	skipUnderRace(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ProbeIdle: time.Second, ExtraArgs: []string{"--reminder-poll", "500ms"}})
	st := openTestStore(t, c.DSN)
	start := time.Now().Add(registrationLead)
	due := registerReminders(t, c, start, 10*time.Second)
	got := awaitAllFired(t, st, len(due), start.Add(40*time.Second))
	var tardy []time.Duration
	dups := 0
	for k, fs := range got {
		if len(fs) != 1 {
			dups++
			continue
		}
		f := fs[0]
		if f.GetDueAtMs() != due[k].UnixMilli() {
			t.Fatalf("%v delivered with due %d, registered %d", k, f.GetDueAtMs(), due[k].UnixMilli())
		}
		if f.GetReceivedAtMs() < f.GetDueAtMs() {
			t.Fatalf("%v fired %d ms early", k, f.GetDueAtMs()-f.GetReceivedAtMs())
		}
		tardy = append(tardy, time.Duration(f.GetReceivedAtMs()-f.GetDueAtMs())*time.Millisecond)
	}
	if dups > 0 {
		t.Fatalf("%d reminders fired more than once in the steady state", dups)
	}
	t.Logf("%d reminders fired once each; tardiness p50 %s p99 %s max %s", len(got), percentile(tardy, 0.5), percentile(tardy, 0.99), percentile(tardy, 1))
	// Grains passivated (1 s idle) between registration and their reminders
	// and were woken by them.
	var idle float64
	for _, n := range c.Nodes() {
		v, _ := n.Metric(`mcpgrain_grain_deactivations_total{kind="probe",node="` + n.ID + `",reason="idle"}`)
		idle += v
	}
	if idle < reminderGrains {
		t.Fatalf("only %v idle passivations: grains were not passivated before their reminders", idle)
	}
	if rows, _ := st.DueReminders(context.Background(), time.Now().Add(time.Hour), 10); len(rows) != 0 {
		t.Fatalf("%d reminders still stored after firing", len(rows))
	}
}

// Killing a node with a third of the reminders pending loses none: the new
// owners fire them (at least once) within 10 s of their due time — the
// failure is seen through a 2 s Consul TTL, the survivors poll every 500 ms
// and then fire the dead node's backlog of ~800 reminders; measured 3–5 s,
// 5.2 s once at load 24 on 2 cores, so the bound leaves that much again.
func TestRemindersSurviveNodeKill(t *testing.T) {
	skipUnderRace(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second, ExtraArgs: []string{"--reminder-poll", "500ms"}})
	st := openTestStore(t, c.DSN)
	start := time.Now().Add(registrationLead)
	due := registerReminders(t, c, start, 10*time.Second)
	table := expectedTable(c, 0, 1, 2)
	victim := c.Node(1)
	for time.Now().Before(start.Add(2 * time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	killedAt := time.Now()
	c.Kill(1)
	got := awaitAllFired(t, st, len(due), start.Add(40*time.Second))
	moved, worst := 0, time.Duration(0)
	for k, fs := range got {
		owner, _ := table.Owner(probe.KindName, k.grain)
		if owner.ID != victim.ID || due[k].Before(killedAt) {
			continue
		}
		moved++
		first := fs[0]
		for _, f := range fs {
			if f.GetReceivedAtMs() < first.GetReceivedAtMs() {
				first = f
			}
		}
		if first.GetNode() == victim.ID {
			continue // fired just before the kill took effect
		}
		late := time.Duration(first.GetReceivedAtMs()-due[k].UnixMilli()) * time.Millisecond
		if late < 0 {
			t.Fatalf("%v fired %s early", k, -late)
		}
		worst = max(worst, late)
	}
	if moved < 1000 {
		t.Fatalf("only %d reminders of the killed node were pending; the scenario did not exercise failover", moved)
	}
	t.Logf("%d reminders pending on the killed node all fired on survivors; worst lateness %s", moved, worst)
	if worst > 10*time.Second {
		t.Fatalf("a reminder of the killed node fired %s after its due time, want <= 10s", worst)
	}
}

package upgrade_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// previousBinary is the previous release's binary (MCPGRAIN_PREVIOUS_BIN,
// from tools/previous/build.sh); the test skips without it, or fails with
// MCPGRAIN_INTEGRATION=1.
func previousBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("MCPGRAIN_PREVIOUS_BIN")
	if bin == "" {
		if os.Getenv("MCPGRAIN_INTEGRATION") == "1" {
			t.Fatal("MCPGRAIN_INTEGRATION=1 but MCPGRAIN_PREVIOUS_BIN is not set: export MCPGRAIN_PREVIOUS_BIN=$(tools/previous/build.sh)")
		}
		t.Skip("rolling upgrade: set MCPGRAIN_PREVIOUS_BIN=$(tools/previous/build.sh)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MCPGRAIN_PREVIOUS_BIN: %v", err)
	}
	return bin
}

// switcher chooses the binary each node starts: testcluster starts node i
// through Wrap, a script that execs the binary named in the file bin-i
// (and logs which, so the node's log says what ran).
type switcher struct {
	dir    string
	script string
}

func newSwitcher(t *testing.T, bin string, nodes int) *switcher {
	t.Helper()
	s := &switcher{dir: t.TempDir()}
	s.script = filepath.Join(s.dir, "node.sh")
	// $1 is the node's index, $2 testcluster's binary (replaced).
	script := fmt.Sprintf("#!/bin/sh\ni=\"$1\"; shift 2\nbin=\"$(cat %q/bin-$i)\"\necho \"upgrade: exec $bin\" >&2\nexec \"$bin\" \"$@\"\n", s.dir)
	if err := os.WriteFile(s.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		s.set(t, i, bin)
	}
	return s
}

func (s *switcher) wrap(i int) []string { return []string{s.script, strconv.Itoa(i)} }

func (s *switcher) set(t *testing.T, i int, bin string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("bin-%d", i)), []byte(bin), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expect checks that node n's latest start ran bin.
func expect(t *testing.T, n *testcluster.Node, bin string) {
	t.Helper()
	lines := n.LogLines("upgrade: exec ", 1)
	if len(lines) == 0 || !strings.HasSuffix(lines[len(lines)-1], bin) {
		t.Fatalf("node %s: want it running %s, its log says %q", n.ID, bin, lines)
	}
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaVersion is the store's latest applied migration.
func schemaVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatalf("schema version: %v", err)
	}
	return v
}

// held is the work put on the old cluster before the roll and finished
// after it.
type held struct {
	sessions  []*session
	pauses    map[string]string // execution id by to-do title
	expiring  map[string]string // execution id by to-do title: never decided, their deadline fires
	expireAt  time.Time         // when the last of them is due
	tasks     []string          // long slow_compute tasks
	reminders map[string]int64  // due time (ms) by probe grain/reminder name
	lastDue   time.Time
}

// holdWork opens sessions, pauses executions, starts long tasks and
// registers reminders due during and after the roll, all on the old
// nodes.
func holdWork(ctx context.Context, t *testing.T, c *testcluster.Cluster, lb *balancer, rec *recorder, tw *tasks) *held {
	t.Helper()
	h := &held{pauses: map[string]string{}, expiring: map[string]string{}, reminders: map[string]int64{}}
	var err error
	if h.sessions, err = openSessions(ctx, lb, 6); err != nil {
		t.Fatal(err)
	}
	for i, s := range h.sessions {
		title := fmt.Sprintf("held-%d", i)
		id, err := pause(ctx, s, title)
		if err != nil {
			t.Fatal(err)
		}
		h.pauses[title] = id
	}
	for i, s := range h.sessions[:3] {
		title := fmt.Sprintf("expire-%d", i)
		id, err := pause(ctx, s, title)
		if err != nil {
			t.Fatal(err)
		}
		h.expiring[title] = id
	}
	h.expireAt = time.Now().Add(approvalWindow)
	for i := range 4 {
		id, err := tw.create(ctx, rec, float64(15+10*i)) // 15-45 s: running while nodes are replaced
		if err != nil {
			t.Fatalf("create a long task: %v", err)
		}
		h.tasks = append(h.tasks, id)
	}
	for g := range 8 {
		grain := fmt.Sprintf("upgrade-rem-%d", g)
		var specs []testcluster.ReminderSpec
		for k := range 3 {
			due := time.Now().Add(5*time.Second + time.Duration(g*3+k)*2*time.Second) // 5-51 s: during and after the roll
			specs = append(specs, testcluster.ReminderSpec{Name: fmt.Sprintf("r%d", k), DueAtMs: due.UnixMilli()})
			h.reminders[grain+"/"+specs[k].Name] = due.UnixMilli()
			h.lastDue = due
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := c.Node(g%3).Remind(rctx, grain, specs)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// roll replaces each node in turn with bin, with the documented drain
// (docs/operations.md, "Upgrading: one node at a time"): SIGTERM, wait for
// the process to exit, start the new binary with the same flags, wait for
// /readyz and every node seeing every member; then traffic must progress
// before the next node. mixed runs once the first node runs bin, while
// the others still run the previous release.
func roll(t *testing.T, c *testcluster.Cluster, sw *switcher, bin string, rec *recorder, mixed func()) {
	t.Helper()
	for i, n := range c.Nodes() {
		if i == 1 {
			began := time.Now()
			mixed()
			t.Logf("mixed cluster (node %s on the current build, the others on the previous release): checked in %s", c.Node(0).ID, time.Since(began).Round(time.Millisecond))
		}
		began := time.Now()
		c.Stop(i)
		drained := time.Since(began)
		t.Logf("node %s: its stop, as it logged it:\n%s", n.ID, stopLog(n))
		sw.set(t, i, bin)
		c.Start(i)
		n.WaitReady(60 * time.Second)
		c.WaitMembers(len(c.Nodes()), 60*time.Second)
		expect(t, n, bin)
		back := time.Since(began)
		if !rec.waitCalls(30, time.Now().Add(60*time.Second)) {
			t.Fatalf("node %s replaced: the echo callers made no progress within 60 s", n.ID)
		}
		t.Logf("node %s: drained and exited %s after SIGTERM; the new binary ready, every node seeing 3 members, %s after SIGTERM; traffic progressing %s after",
			n.ID, drained.Round(time.Millisecond), back.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	}
}

// stopLog is what node n logged (above debug level) from "shutting down"
// on: what its drain waited for.
func stopLog(n *testcluster.Node) string {
	lines := strings.Split(n.LogTail(2000), "\n")
	from := len(lines)
	for i, l := range lines {
		if strings.Contains(l, "shutting down") {
			from = i
		}
	}
	var out []string
	for _, l := range lines[from:] {
		if !strings.Contains(l, "level=DEBUG") && len(out) < 20 {
			out = append(out, "    "+trim(l, 300))
		}
	}
	return strings.Join(out, "\n")
}

// TestRollingUpgradeFromThePreviousRelease upgrades a three-node cluster
// of the previous release to the current build, one node at a time, with
// the documented drain, under traffic (echo calls on open sessions,
// executions paused and accepted, short tasks), while sessions, paused
// executions, long tasks and reminders made on the old nodes wait. Once
// the first node is replaced, code mode's cross-session resume is driven
// both ways between it and an old node (crossSessionResumes). After
// the roll every held pause is accepted and must write its to-do exactly
// once, every task must end exactly once (completed), every reminder must
// have fired, the pauses left undecided must time out at their deadline
// without writing, every session must still answer, and the error rate of
// the roll is logged and bounded (generously: the documented contract is
// retryable errors, at most, during each step).
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	prev := previousBinary(t)
	began := time.Now()
	todos, todoFlag := testcluster.TodoAPI(t)
	sw := newSwitcher(t, prev, 3)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Wrap: sw.wrap, ExtraArgs: []string{
		"--reminder-poll", "250ms", "--rate-limit", "0", "--openapi", todoFlag, "--approval-window", approvalWindow.String(),
		"--keys-file", testcluster.KeysFile(t), "--tools", "code,demo,conformance"}}) // conformance: slow_compute, a task tool
	cur := testcluster.Binary(t)
	for _, n := range c.Nodes() {
		expect(t, n, prev)
	}
	db := openDB(t, c.DSN)
	oldSchema := schemaVersion(t, db)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	lb := newBalancer(ctx, c)
	rec := newRecorder()
	tw := newTasks(lb)
	h := holdWork(ctx, t, c, lb, rec, tw)
	t.Logf("old cluster up with held work in %s", time.Since(began).Round(time.Millisecond))

	traffic, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	accepted := make(chan string, 10000)
	callers(traffic, &wg, rec, h.sessions, 4)
	approvers(traffic, &wg, rec, lb, h.sessions, accepted)
	tw.loop(traffic, &wg, rec)
	if !rec.waitCalls(30, time.Now().Add(60*time.Second)) {
		t.Fatal("the echo callers made no progress on the old cluster")
	}
	from := time.Now()
	roll(t, c, sw, cur, rec, func() { crossSessionResumes(t, c, todos, 0, 1) })
	to := time.Now()
	stopTraffic()
	wg.Wait()
	close(accepted)
	total, failed, lines := rec.window(from, to)
	t.Logf("the roll took %s: %d requests, %d failed (%.2f%%)\n%s", to.Sub(from).Round(time.Millisecond), total, failed, pct(failed, total), strings.Join(lines, "\n"))
	if total < 100 || pct(failed, total) > 10 {
		t.Errorf("error rate during the roll: %d of %d requests failed (bound: 10%% of at least 100)", failed, total)
	}
	t.Logf("store schema version %d under the previous release, %d after the roll (migrations ran at the first new node's start, with two old nodes serving)", oldSchema, schemaVersion(t, db))

	finish(ctx, t, lb, rec, tw, todos, db, h, accepted)
	t.Logf("the whole test took %s", time.Since(began).Round(time.Millisecond))
}

// finish accepts the held pauses and checks every promise of the test.
func finish(ctx context.Context, t *testing.T, lb *balancer, rec *recorder, tw *tasks, todos *demo.API, db *sql.DB, h *held, accepted <-chan string) {
	t.Helper()
	want := map[string]bool{}
	for title, id := range h.pauses {
		if _, err := decide(ctx, rec, lb, id); err != nil {
			t.Errorf("held pause %s (%s), made on the previous release: %v", title, id, err)
			continue
		}
		want[title] = true
	}
	for title := range accepted {
		want[title] = true
	}
	checkTodos(t, todos, want, len(h.pauses))
	violations, ends := tw.check(ctx, rec, time.Now().Add(90*time.Second))
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("tasks: %d created, ends %v", len(tw.history), ends)
	for _, id := range h.tasks {
		if end := taskEnd(tw, id); end != "completed" {
			t.Errorf("long task %s, created on the previous release: ended %q, want completed", id, end)
		}
		var attempts int
		if err := db.QueryRow(`SELECT attempts FROM tasks WHERE task_id = $1`, id).Scan(&attempts); err == nil {
			t.Logf("long task %s: completed after %d attempt(s) of its work", id, attempts)
		}
	}
	checkReminders(t, db, h)
	checkExpired(ctx, t, lb, rec, todos, h)
	for i, s := range h.sessions {
		if err := echoRetrying(ctx, s, fmt.Sprintf("after-%d", i)); err != nil {
			t.Errorf("session %d (%s), opened on the previous release, after the roll: %v", i, s.cs.ID(), err)
		}
	}
}

func taskEnd(tw *tasks, id string) string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	for _, op := range tw.history[id].Ops {
		if op.Status == "completed" || op.Status == "failed" || op.Status == "cancelled" {
			return op.Status
		}
	}
	return ""
}

// approvalWindow is the nodes' --approval-window: long enough for the held
// pauses to be accepted after the roll (it took 14-36 s here), short
// enough that the expiring ones' deadlines fire within the test.
const approvalWindow = 2 * time.Minute

// checkExpired waits until the expiring pauses' deadlines have passed (a
// durable reminder registered by the previous release declines each with
// approval_timeout, on whichever node owns its session by then) and checks
// that each was decided so (an accept is refused with 409) and that its
// write never ran.
func checkExpired(ctx context.Context, t *testing.T, lb *balancer, rec *recorder, todos *demo.API, h *held) {
	t.Helper()
	time.Sleep(time.Until(h.expireAt.Add(5 * time.Second))) // the deadline is the event: nothing to poll before it
	for title, id := range h.expiring {
		if status, _ := decide(ctx, rec, lb, id); status != http.StatusConflict {
			t.Errorf("pause %s (%s), made on the previous release, past its deadline: an accept answered %d, want 409 (timed out)", title, id, status)
		}
	}
	for _, td := range todos.Todos() {
		if _, ok := h.expiring[td.Title]; ok {
			t.Errorf("pause %s timed out, but its write ran", td.Title)
		}
	}
	t.Logf("approval deadlines: %d pauses made on the previous release timed out after the roll, none wrote", len(h.expiring))
}

// echoRetrying calls echo on s, retrying retryable errors for 30 s.
func echoRetrying(ctx context.Context, s *session, text string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := echo(ctx, s, text)
		if err == nil || !retryableText(err.Error()) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
}

// checkTodos waits until every accepted title's to-do exists (a decided
// execution resumes after the decision's answer) and checks that none was
// written twice.
func checkTodos(t *testing.T, todos *demo.API, want map[string]bool, held int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := map[string]int{}
		for _, td := range todos.Todos() {
			n[td.Title]++
		}
		var missing, twice []string
		for title := range want {
			if n[title] == 0 {
				missing = append(missing, title)
			}
		}
		for title, k := range n {
			if k > 1 {
				twice = append(twice, fmt.Sprintf("%s (%d times)", title, k))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			slices.Sort(missing)
			slices.Sort(twice)
			if len(missing) > 0 {
				t.Errorf("accepted executions whose write never ran: %v", missing)
			}
			if len(twice) > 0 {
				t.Errorf("writes that ran more than once: %v", twice)
			}
			t.Logf("pauses: %d accepted (%d held across the roll), each wrote its to-do once: %v", len(want), held, len(missing) == 0 && len(twice) == 0)
			return
		}
		time.Sleep(250 * time.Millisecond) // poll the to-do API
	}
}

// checkReminders waits until every reminder is due (and a few polls
// more) and checks that each fired: the probe grain records its fires.
func checkReminders(t *testing.T, db *sql.DB, h *held) {
	t.Helper()
	deadline := h.lastDue.Add(30 * time.Second)
	for {
		missing := missingReminders(t, db, h.reminders)
		if len(missing) == 0 {
			t.Logf("reminders: all %d fired", len(h.reminders))
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("reminders registered on the previous release that never fired: %v", missing)
			return
		}
		time.Sleep(500 * time.Millisecond) // poll the store
	}
}

// missingReminders lists the reminders (grain/name) no probe recorded as
// fired.
func missingReminders(t *testing.T, db *sql.DB, want map[string]int64) []string {
	t.Helper()
	fired := map[string]bool{}
	for key := range want {
		grain := key[:strings.LastIndex(key, "/")]
		var record []byte
		if err := db.QueryRow(`SELECT record FROM grains WHERE grain = $1`, "probe/"+grain).Scan(&record); err != nil {
			continue
		}
		var rec pb.ProbeRecord
		if err := proto.Unmarshal(record, &rec); err != nil {
			t.Fatalf("probe record of %s: %v", grain, err)
		}
		for _, f := range rec.GetFires() {
			fired[grain+"/"+f.GetName()] = true
		}
	}
	var missing []string
	for key := range want {
		if !fired[key] {
			missing = append(missing, key)
		}
	}
	slices.Sort(missing)
	return missing
}

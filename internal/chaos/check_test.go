package chaos

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSingleOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks []Ack
		want string
	}{
		{"none", nil, ""},
		{"one owner", []Ack{{1, 1, "a"}, {2, 1, "a"}, {3, 1, "a"}}, ""},
		{"handover", []Ack{{3, 2, "b"}, {1, 1, "a"}, {2, 1, "a"}, {4, 3, "a"}}, ""},
		{"stale write after takeover", []Ack{{1, 1, "a"}, {2, 2, "b"}, {3, 1, "a"}}, "overlapping owners"},
		{"same count twice", []Ack{{1, 1, "a"}, {2, 1, "a"}, {2, 2, "b"}}, "acknowledged twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(SingleOwner("g", tc.acks), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("SingleOwner = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCounter(t *testing.T) {
	for _, tc := range []struct {
		final          int64
		acked, unknown int
		want           string
	}{
		{10, 10, 0, ""},
		{11, 10, 2, ""},
		{12, 10, 2, ""},
		{9, 10, 5, "lost"},
		{13, 10, 2, "applied twice"},
	} {
		got := strings.Join(Counter("g", tc.final, tc.acked, tc.unknown), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Fatalf("Counter(%d, %d, %d) = %q, want %q", tc.final, tc.acked, tc.unknown, got, tc.want)
		}
	}
}

func TestLiveness(t *testing.T) {
	outs := []Outcome{
		{What: "ok", Took: time.Second, OK: true},
		{What: "retry", Took: 2 * time.Second, Retryable: true, Err: "503"},
		{What: "slow", Took: 11 * time.Second, OK: true},
		{What: "broken", Took: time.Second, Err: "404 session not found"},
	}
	got := Liveness(outs, 10*time.Second)
	if len(got) != 2 || !strings.Contains(got[0], "slow") || !strings.Contains(got[1], "broken") {
		t.Fatalf("Liveness = %q", got)
	}
}

func TestGrowth(t *testing.T) {
	cases := []struct {
		name    string
		samples []float64
		round   string // "": no violation
	}{
		{"within the bound", []float64{100, 140, 149}, ""},
		{"over the larger of the first two samples", []float64{100, 120, 181}, "round 3"},
		{"a first sample low after a restart is not the baseline", []float64{60, 100, 140}, ""},
		{"still growing after the baseline", []float64{60, 100, 140, 151}, "round 4"},
		{"two samples: the first is the baseline", []float64{100, 151}, "round 2"},
		{"one sample", []float64{100}, ""},
	}
	for _, c := range cases {
		v := Growth("rss", c.samples, 1.5, 0)
		switch {
		case c.round == "" && len(v) != 0:
			t.Errorf("%s: %v", c.name, v)
		case c.round != "" && (len(v) != 1 || !strings.Contains(v[0], c.round)):
			t.Errorf("%s: want a violation after %s, got %v", c.name, c.round, v)
		}
	}
}

// at is a point of a test history, ms milliseconds after t0.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestDecisions(t *testing.T) {
	won := func(a string, call, ret int) DecisionOp {
		return DecisionOp{Action: a, Call: at(call), Return: at(ret), Result: DecisionWon}
	}
	already := func(a string, call, ret int) DecisionOp {
		return DecisionOp{Action: a, Call: at(call), Return: at(ret), Result: DecisionAlready}
	}
	unknown := func(a string, call int) DecisionOp {
		return DecisionOp{Action: a, Call: at(call), Return: at(call + 15000), Result: DecisionUnknown}
	}
	saw := func(a, s string, call, ret int) DecisionOp {
		return DecisionOp{Action: a, Saw: s, Call: at(call), Return: at(ret), Result: DecisionSaw}
	}
	for _, tc := range []struct {
		name string
		ops  []DecisionOp
		want string // "" when linearizable; a violation's words otherwise
	}{
		{"one approver", []DecisionOp{won("accept", 0, 10)}, ""},
		{"race, then a reader", []DecisionOp{won("accept", 0, 10), already("decline", 1, 12), already("cancel", 20, 25)}, ""},
		{"the loser arrived first but answered later", []DecisionOp{already("decline", 0, 30), won("accept", 5, 10)}, ""},
		{"409 after our own attempt of unknown outcome", []DecisionOp{unknown("accept", 0), already("accept", 100, 110)}, ""},
		{"409 after the other approver's unknown attempt", []DecisionOp{unknown("decline", 0), already("accept", 100, 110)}, ""},
		{"409 with nothing that could have decided it", []DecisionOp{already("accept", 0, 10)}, "no request that could have decided"},
		{"409 before the only other request was sent", []DecisionOp{already("accept", 0, 10), won("decline", 20, 30)}, "no request that could have decided"},
		{"decided twice", []DecisionOp{won("accept", 0, 10), won("decline", 5, 15)}, "decided 2 times"},
		{"sessionless race agrees", []DecisionOp{saw("accept", "decline", 0, 20), saw("decline", "decline", 1, 10), saw("cancel", "decline", 30, 40)}, ""},
		{"sessionless answers disagree", []DecisionOp{saw("accept", "accept", 0, 20), saw("decline", "decline", 1, 10)}, "two decisions"},
		{"an answer shows what nobody sent", []DecisionOp{saw("accept", "decline", 0, 20)}, "no request had sent"},
		{"a winner the answers contradict", []DecisionOp{won("accept", 0, 10), saw("decline", "decline", 1, 12)}, "but an answer shows decline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				tc.ops[i].Execution = "exec_1"
			}
			hand := strings.Join(Decisions("exec_1", tc.ops), "; ")
			if (tc.want == "") != (hand == "") || !strings.Contains(hand, tc.want) {
				t.Errorf("Decisions = %q, want %q", hand, tc.want)
			}
			// porcupine must agree with the hand-written checker.
			model := strings.Join(LinearizableDecisions(tc.ops, 5*time.Second), "; ")
			if (tc.want == "") != (model == "") {
				t.Errorf("LinearizableDecisions = %q, want linearizable %v", model, tc.want == "")
			}
		})
	}
}

func TestLinearizableCounters(t *testing.T) {
	add := func(call, ret int, count int64) CounterOp {
		return CounterOp{Identity: "c", Call: at(call), Return: at(ret), Delta: 1, Count: count, Known: true}
	}
	lost := func(call int) CounterOp { return CounterOp{Identity: "c", Call: at(call), Delta: 1} }
	read := func(call, ret int, count int64) CounterOp {
		return CounterOp{Identity: "c", Call: at(call), Return: at(ret), Count: count, Known: true}
	}
	for _, tc := range []struct {
		name string
		ops  []CounterOp
		ok   bool
	}{
		{"sequential", []CounterOp{add(0, 10, 1), add(20, 30, 2), read(40, 50, 2)}, true},
		{"concurrent, answered out of order", []CounterOp{add(0, 30, 2), add(5, 10, 1), read(40, 50, 2)}, true},
		{"unknown outcome applied", []CounterOp{add(0, 10, 1), lost(15), add(20, 30, 3), read(40, 50, 3)}, true},
		{"unknown outcome not applied", []CounterOp{add(0, 10, 1), lost(15), add(20, 30, 2), read(40, 50, 2)}, true},
		{"unknown outcome applied after the last answer", []CounterOp{add(0, 10, 1), lost(15), read(40, 50, 1)}, true},
		// Not linearizable: the porcupine model must reject these.
		{"two writes acknowledged with one count", []CounterOp{add(0, 10, 1), add(5, 15, 1)}, false},
		{"an acknowledged write lost", []CounterOp{add(0, 10, 1), add(20, 30, 2), read(40, 50, 1)}, false},
		{"real-time order broken (a stale owner wrote)", []CounterOp{add(0, 10, 2), add(20, 30, 1)}, false},
		{"a write applied twice", []CounterOp{add(0, 10, 1), read(20, 30, 2)}, false},
		{"stale read", []CounterOp{add(0, 10, 1), read(20, 30, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LinearizableCounters(tc.ops, 5*time.Second)
			if (len(got) == 0) != tc.ok {
				t.Fatalf("LinearizableCounters = %q, want linearizable %v", got, tc.ok)
			}
			if !tc.ok && !strings.Contains(got[0], "not linearizable") {
				t.Fatalf("LinearizableCounters = %q, want a 'not linearizable' verdict", got)
			}
		})
	}
	// Identities are checked apart: one bad history is reported by name.
	other := []CounterOp{{Identity: "d", Call: at(0), Return: at(10), Delta: 1, Count: 1, Known: true}}
	bad := append([]CounterOp{add(0, 10, 1), add(5, 15, 1)}, other...)
	if got := LinearizableCounters(bad, 5*time.Second); len(got) != 1 || !strings.HasPrefix(got[0], "counter c:") {
		t.Fatalf("LinearizableCounters = %q, want one violation for c", got)
	}
}

func TestGapBound(t *testing.T) {
	tm := Timing{TTL: 2 * time.Second, Silence: 3 * time.Second, HealthCheck: 550 * time.Millisecond, StoreCheck: time.Second, Slack: 2 * time.Second}
	for _, tc := range []struct {
		fault  string
		outage time.Duration
		want   time.Duration
	}{
		{"kill", time.Second, 4550 * time.Millisecond},
		{"stop", 0, 2550 * time.Millisecond},
		{"freeze", 15 * time.Second, 7550 * time.Millisecond},
		{"consul", 800 * time.Millisecond, 4 * time.Second},
		{"postgres", 1200 * time.Millisecond, 4200 * time.Millisecond},
		{"postgres", 5 * time.Second, 8 * time.Second},
		{"flood", 0, 0},
	} {
		got, how := tm.GapBound(Round{Fault: tc.fault, Outage: tc.outage})
		if got != tc.want || how == "" {
			t.Errorf("GapBound(%s, outage %s) = %s (%s), want %s", tc.fault, tc.outage, got, how, tc.want)
		}
	}
}

func TestLongestGap(t *testing.T) {
	outs := []Outcome{
		{Kind: KindCall, OK: true, At: at(300)},
		{Kind: KindCall, OK: true, At: at(100)},
		{Kind: KindCall, At: at(900)},                      // failed: no service
		{Kind: KindProbe, OK: true, At: at(1200)},          // another kind
		{Kind: KindCall, OK: true, At: at(1500)},           // 1.2 s after the one before
		{Kind: KindCall, OK: true, At: at(5000)},           // after the window
		{Kind: KindCall, OK: true, At: t0.Add(-time.Hour)}, // before it
	}
	for _, tc := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 2000, 1200 * time.Millisecond},
		{0, 4000, 2500 * time.Millisecond}, // from the last success to the end
		{2000, 3000, time.Second},          // nothing in the window
	} {
		if got := LongestGap(outs, KindCall, at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("LongestGap(%d, %d) = %s, want %s", tc.from, tc.to, got, tc.want)
		}
	}
}

const testBaseline = `
# fault   gap    errors
kill      2s     20   # worst of the recorded runs
stop      500ms  10
tolerance gap    1.5  1s
tolerance errors 2    20
`

func TestParseBaseline(t *testing.T) {
	b, err := ParseBaseline(testBaseline)
	if err != nil {
		t.Fatal(err)
	}
	gap, budget, ok := b.Limits("kill")
	if !ok || gap != 4*time.Second || budget != 60 {
		t.Fatalf("Limits(kill) = %s, %d, %v; want 4s, 60, true", gap, budget, ok)
	}
	if _, _, ok := b.Limits("freeze"); ok {
		t.Fatal("Limits(freeze) found a fault the baseline does not have")
	}
	for _, bad := range []string{
		"kill 3s 20\ntolerance gap 1.5 1s",                       // no error tolerance
		"kill 3s\n" + "tolerance gap 1 1s\ntolerance errors 1 0", // a field missing
		"kill 3 20\ntolerance gap 1 1s\ntolerance errors 1 0",    // a gap without a unit
		"kill 3s 20\nkill 2s 10\ntolerance gap 1 1s\ntolerance errors 1 0",
		"kill 3s 20\ntolerance gap 0.5 1s\ntolerance errors 1 0", // a factor below 1
	} {
		if _, err := ParseBaseline(bad); err == nil {
			t.Errorf("ParseBaseline(%q) accepted it", bad)
		}
	}
}

// TestBaselineFileCoversEveryFault: the checked-in baseline has figures for
// every fault the harness injects.
func TestBaselineFileCoversEveryFault(t *testing.T) {
	b, err := os.ReadFile("testdata/baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	base, err := ParseBaseline(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Faults {
		if _, _, ok := base.Limits(f); !ok {
			t.Errorf("testdata/baseline.txt has no figures for fault %s", f)
		}
	}
}

func TestCheckRound(t *testing.T) {
	tm := Timing{TTL: 2 * time.Second, Silence: 3 * time.Second, HealthCheck: 550 * time.Millisecond, StoreCheck: time.Second, Slack: 2 * time.Second}
	base, err := ParseBaseline(testBaseline)
	if err != nil {
		t.Fatal(err)
	}
	round := Round{N: 1, Fault: "kill", Node: "n2", Began: at(0), Healed: at(4000), Ended: at(12000)}
	// steady: every worker kind succeeds every 100 ms, except in
	// [from, to), where each of six kinds fails with a retryable 503
	// every `every` ms (the others wait: the error counts do not grow
	// with the number of worker kinds).
	steady := func(from, to, every int) []Outcome {
		var outs []Outcome
		for ms := 0; ms < 12000; ms += 100 {
			for i, k := range Workers {
				switch {
				case ms < from || ms >= to:
					outs = append(outs, Outcome{Kind: k, OK: true, At: at(ms)})
				case ms%every == 0 && i < 6:
					outs = append(outs, Outcome{Kind: k, Retryable: true, Err: "503 restarting", At: at(ms)})
				}
			}
		}
		return outs
	}
	for _, tc := range []struct {
		name string
		outs []Outcome
		want []string // words of each violation, in order; none when the round passes
	}{
		{"recovered within the bounds", steady(1000, 3000, 500), nil},
		{"slower than the baseline, within the mechanism's bound", steady(1000, 5300, 500), []string{"regression"}},
		{"over the bound derived from the TTL", steady(1000, 6000, 500), []string{"> bound 4.55s", "regression"}},
		{"too many errors", steady(1000, 2600, 100), []string{"error budget 60"}},
		// Only retryable 503s for the whole round: the liveness checker
		// (every request answered, retryably) passes it; these do not.
		{"only retryable 503s for the whole round", steady(0, 12000, 100), []string{
			"> bound", "regression", "error budget", "no successful tools/call", "no successful probe", "no successful approval", "no successful sessionless approval", "no successful task", "no successful notes",
			"no successful deploy", "no successful schedule"}},
		{"one worker kind stuck after the fault", func() []Outcome {
			var outs []Outcome
			for _, o := range steady(1000, 3000, 500) {
				if o.Kind != KindSessionless || o.At.Before(at(4000)) {
					outs = append(outs, o)
				}
			}
			return outs
		}(), []string{"no successful sessionless approval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if liveness := Liveness(tc.outs, 10*time.Second); len(liveness) != 0 {
				t.Fatalf("the liveness checker should pass these outcomes: %q", liveness)
			}
			rep, got := CheckRound(round, tc.outs, tm, base)
			if len(got) != len(tc.want) {
				t.Fatalf("CheckRound = %q, want %d violations %q (report %+v)", got, len(tc.want), tc.want, rep)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
	// A round's Kinds are the worker kinds that ran: one not among them
	// (the deploy worker switched off) need not show progress.
	var noDeploy []Outcome
	for _, o := range steady(1000, 3000, 500) {
		if o.Kind != KindDeploy {
			noDeploy = append(noDeploy, o)
		}
	}
	if _, got := CheckRound(round, noDeploy, tm, base); len(got) != 1 || !strings.Contains(got[0], "no successful deploy") {
		t.Fatalf("CheckRound without deploys = %q, want the deploy worker's missing progress", got)
	}
	without := round
	without.Kinds = slices.DeleteFunc(slices.Clone(Workers), func(k string) bool { return k == KindDeploy })
	if _, got := CheckRound(without, noDeploy, tm, base); len(got) != 0 {
		t.Fatalf("CheckRound of a round without the deploy worker = %q, want none", got)
	}
	// A fault without baseline figures is a violation, not a pass.
	if _, got := CheckRound(Round{N: 2, Fault: "freeze", Began: at(0), Healed: at(1), Ended: at(12000)}, steady(0, 0, 100), tm, base); len(got) != 1 || !strings.Contains(got[0], "no figures") {
		t.Fatalf("CheckRound(freeze) = %q, want a missing-baseline violation", got)
	}
}

func TestWinner(t *testing.T) {
	op := func(action string, r DecisionResult, saw string) DecisionOp {
		return DecisionOp{Action: action, Result: r, Saw: saw}
	}
	for _, tc := range []struct {
		name string
		ops  []DecisionOp
		want string // "" when unknown
	}{
		{"none", nil, ""},
		{"a winner", []DecisionOp{op("decline", DecisionAlready, ""), op("accept", DecisionWon, "")}, "accept"},
		{"an answer shows it", []DecisionOp{op("accept", DecisionSaw, "decline")}, "decline"},
		{"only one request could have decided", []DecisionOp{op("accept", DecisionUnknown, ""), op("accept", DecisionAlready, ""), op("decline", DecisionAlready, "")}, "accept"},
		{"either could have", []DecisionOp{op("accept", DecisionUnknown, ""), op("decline", DecisionUnknown, ""), op("cancel", DecisionAlready, "")}, ""},
		{"nothing says it was decided", []DecisionOp{op("accept", DecisionUnknown, "")}, ""},
	} {
		got, ok := Winner(tc.ops)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: Winner = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

func TestTaskOnce(t *testing.T) {
	get := func(call, ret int, status, outcome string) TaskOp {
		return TaskOp{Method: MethodTaskGet, Call: at(call), Return: at(ret), Status: status, Outcome: outcome}
	}
	notFound := func(call, ret int) TaskOp {
		return TaskOp{Method: MethodTaskGet, Call: at(call), Return: at(ret), NotFound: true}
	}
	cancel := func(call, ret int) TaskOp { return TaskOp{Method: MethodTaskCancel, Call: at(call), Return: at(ret)} }
	const done = `{"content":[{"type":"text","text":"done"}]}`
	for _, tc := range []struct {
		name string
		ops  []TaskOp
		want []string // words of each violation, in order; none when the history passes
	}{
		{"working, then completed, then the same again", []TaskOp{get(100, 150, TaskWorking, ""), get(400, 450, TaskCompleted, done), get(700, 750, TaskCompleted, done)}, nil},
		{"cancelled while working", []TaskOp{get(100, 150, TaskWorking, ""), cancel(200, 260), get(300, 350, TaskCancelled, "")}, nil},
		{"cancelled after it had completed: the end stays", []TaskOp{get(100, 150, TaskCompleted, done), cancel(200, 260), get(300, 350, TaskCompleted, done)}, nil},
		{"input required, then failed", []TaskOp{get(100, 150, TaskInputRequired, ""), get(400, 450, TaskFailed, `{"code":-32603}`)}, nil},
		// A get sent before the terminal answer came may be ordered before
		// it: no real-time order says it went back.
		{"overlapping gets", []TaskOp{get(100, 500, TaskWorking, ""), get(200, 300, TaskCompleted, done)}, nil},
		{"never terminal", []TaskOp{get(100, 150, TaskWorking, ""), get(400, 450, TaskWorking, "")}, []string{"never seen terminal"}},
		{"no answer at all", nil, []string{"never seen terminal"}},
		{"terminal only after the bound", []TaskOp{get(100, 150, TaskWorking, ""), get(9000, 11000, TaskCompleted, done)}, []string{"after the bound"}},
		{"back from terminal", []TaskOp{get(100, 150, TaskCompleted, done), get(400, 450, TaskWorking, ""), get(700, 750, TaskCompleted, done)}, []string{"back from a terminal status"}},
		{"terminal twice", []TaskOp{get(100, 150, TaskFailed, `{"code":-32603}`), get(400, 450, TaskCompleted, done)}, []string{"terminal twice"}},
		{"its result changed", []TaskOp{get(100, 150, TaskCompleted, done), get(400, 450, TaskCompleted, `{"content":[]}`)}, []string{"its end changed"}},
		{"not found before its TTL", []TaskOp{get(100, 150, TaskWorking, ""), notFound(400, 450), get(700, 750, TaskCompleted, done)}, []string{"before its TTL"}},
		{"not found after its TTL", []TaskOp{get(100, 150, TaskCompleted, done), notFound(70000, 70050)}, nil},
		{"working after an acknowledged cancel", []TaskOp{cancel(100, 150), get(200, 250, TaskWorking, ""), get(400, 450, TaskCancelled, "")}, []string{"cancel acknowledged"}},
		{"an unknown status", []TaskOp{get(100, 150, "running", ""), get(400, 450, TaskCompleted, done)}, []string{"unknown status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := TaskHistory{ID: "task-1", Tool: "slow_compute", Created: at(0), TTL: time.Minute, Ops: tc.ops}
			got := TaskOnce(h, at(10000))
			if len(got) != len(tc.want) {
				t.Fatalf("TaskOnce = %q, want %d violations %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestTaskEnd(t *testing.T) {
	h := TaskHistory{Ops: []TaskOp{
		{Method: MethodTaskGet, Return: at(300), Status: TaskCompleted},
		{Method: MethodTaskCancel, Return: at(100)},
		{Method: MethodTaskGet, Return: at(200), Status: TaskCancelled},
		{Method: MethodTaskGet, Return: at(50), Status: TaskWorking},
	}}
	if got := TaskEnd(h); got != TaskCancelled {
		t.Errorf("TaskEnd = %q, want the first terminal status seen, %q", got, TaskCancelled)
	}
	if got := TaskEnd(TaskHistory{Ops: h.Ops[1:2]}); got != "" {
		t.Errorf("TaskEnd of a history never terminal = %q, want \"\"", got)
	}
}

package mcpruntime

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// A tool call's identity is its tool's name and its arguments as JSON
// values: the order of object keys and white space do not matter, any
// other difference does.
func TestCallIdentity(t *testing.T) {
	base := identity("deploy", json.RawMessage(`{"service":"api","version":"1"}`))
	for _, tc := range []struct {
		name, tool, args string
		same             bool
	}{
		{"the same call", "deploy", `{"service":"api","version":"1"}`, true},
		{"keys in another order, other spacing", "deploy", `{ "version": "1", "service": "api" }`, true},
		{"another argument value", "deploy", `{"service":"api","version":"2"}`, false},
		{"an extra argument", "deploy", `{"service":"api","version":"1","force":true}`, false},
		{"another tool", "rollback", `{"service":"api","version":"1"}`, false},
		{"no arguments", "deploy", ``, false},
	} {
		if got := identity(tc.tool, json.RawMessage(tc.args)) == base; got != tc.same {
			t.Errorf("%s: same identity %v, want %v", tc.name, got, tc.same)
		}
	}
	if identity("a", json.RawMessage(`"b"`)) == identity("a\x00", json.RawMessage(`b"`)) {
		t.Error("the tool name and the arguments run together")
	}
}

// The channel a waiting call selects on is closed by close whether it was
// made before (a call waiting) or after (a call starting to wait on a
// closed runtime); closing twice is harmless; the maps of open calls and
// pauses exist only while they hold something.
func TestAsksClosingAndLazyMaps(t *testing.T) {
	var a asks
	if a.closed != nil || a.open != nil || a.pauses != nil {
		t.Fatal("a fresh asks made a channel or a map")
	}
	before := a.closing()
	select {
	case <-before:
		t.Fatal("closed before close")
	default:
	}
	a.close()
	a.close()
	for i, ch := range []<-chan struct{}{before, a.closing()} {
		select {
		case <-ch:
		default:
			t.Fatalf("channel %d not closed after close", i)
		}
	}
	var late asks
	late.close()
	select {
	case <-late.closing():
	default:
		t.Fatal("a channel made after close is not closed")
	}
	c := &durableCall{}
	a.setOpen("id", c)
	a.setPause("e1", &askPause{c: c})
	if a.open["id"] != c || a.pauses["e1"] == nil {
		t.Fatal("setOpen/setPause did not record")
	}
	a.dropOpen("id")
	a.dropPause("e1")
	if a.open != nil || a.pauses != nil {
		t.Fatal("an emptied map is kept")
	}
}

// noLeases are lease hooks that do nothing.
type noLeases struct{}

func (noLeases) Paused(string, time.Time) {}
func (noLeases) Resuming(string, string)  {}
func (noLeases) Settled(string)           {}

// The durable calls' node-wide settings (the journal, the window, the
// directory, the links' origin, the cap, the approvers, the decision and
// continuation senders, the clock) are made once for a node and shared by
// its runtimes' asks, not copied into every resident session: a session's
// asks is its own state and one pointer, in the 112-byte size class (it
// was 160 B and a directory handle of its own; issue 29).
func TestAsksShareTheNodeSettings(t *testing.T) {
	if n := unsafe.Sizeof(asks{}); n > 112 {
		t.Errorf("asks is %d B, want at most 112 (node-wide settings belong in askNode)", n)
	}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg := Config{Store: st, PublicURL: "https://approve.example", MaxPendingAsks: 3, Approvers: policy.ApproversAdmin}
	node := newAskNode(cfg, callstore.New(st))
	if node.window != engine.DefaultApprovalWindow || node.laterCap != 3 || node.publicURL != cfg.PublicURL ||
		node.approvers != policy.ApproversAdmin || node.dir == nil || node.now == nil {
		t.Fatalf("node settings %+v", *node)
	}
	b := &Builder{asks: node}
	in := session.BuildInput{Grain: "g1", Epoch: func() uint64 { return 1 }, Leases: noLeases{}}
	a1, a2 := newAsks(&Runtime{b: b}, in), newAsks(&Runtime{b: b}, in)
	if a1 == nil || a2 == nil || a1.askNode != node || a2.askNode != node {
		t.Fatal("a runtime's asks do not point at the node's settings")
	}
	if a1.window != node.window || a1.dir != node.dir {
		t.Fatal("the node's settings are not the asks' own")
	}
	if newAsks(&Runtime{b: b}, session.BuildInput{}) != nil {
		t.Fatal("a session without a grain key has durable calls")
	}
	cm := Config{Store: st, CodeMode: &CodeMode{Window: time.Minute}}
	if w := newAskNode(cm, nil).window; w != time.Minute {
		t.Errorf("window %v, want code mode's 1m", w)
	}
	if w := newAskNode(Config{Store: st, AskWindow: time.Hour}, nil).window; w != time.Hour {
		t.Errorf("window %v, want AskWindow's 1h", w)
	}
}

// The token of a POST exchange, which stays with a resident session in
// the headers go-sdk keeps of its last request, is short and unique on
// the node (issue 29).
func TestExchangeTokensAreShortAndDistinct(t *testing.T) {
	var b Builder
	seen := map[string]bool{}
	for range 1000 {
		tok := b.newExchangeToken()
		if tok == "" || len(tok) > 8 || seen[tok] {
			t.Fatalf("token %q (seen before: %v)", tok, seen[tok])
		}
		seen[tok] = true
	}
}

// A durable session's code-mode journal is made when its engine is, from
// the runtime's durable calls (grain key, epoch) and the node's run
// store: a session that never runs code keeps none (issue 29). Without
// durable code mode or a grain key there is none; a session whose grain
// has no durable calls gets one made at once, as before.
func TestCodeJournalMadeWithTheEngine(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	epoch := func() uint64 { return 7 }
	b := &Builder{cfg: Config{CodeMode: &CodeMode{Durable: true}}, runs: runstore.New(st)}
	r := &Runtime{b: b, asks: &asks{grain: "g1", epoch: epoch}}
	in := session.BuildInput{Grain: "g1", Epoch: epoch}
	src := r.journalSource(in)
	if src != journalSource(r) {
		t.Fatalf("source %T, want the runtime", src)
	}
	j, ok := newCodeRuntime(b.cfg.CodeMode, "s1", nil, true, src).journalOf().(engine.StoreJournal)
	if !ok || j.Store != b.runs || j.Grain != "g1" || j.EpochOf == nil || j.EpochOf() != 7 || j.Publish {
		t.Fatalf("journal %+v", j)
	}
	if r.journalSource(session.BuildInput{Epoch: epoch}) != nil {
		t.Error("a session without a grain key has a journal")
	}
	b.cfg.CodeMode.Durable = false
	if r.journalSource(in) != nil {
		t.Error("code mode not durable, yet a journal")
	}
	b.cfg.CodeMode.Durable = true
	r.asks = nil
	if f, ok := r.journalSource(in).(fixedJournal); !ok || f.j.(engine.StoreJournal).Grain != "g1" {
		t.Errorf("without durable calls: %T", r.journalSource(in))
	}
	if newCodeRuntime(b.cfg.CodeMode, "s1", nil, true, nil).journalOf() != nil {
		t.Error("a journal from no source")
	}
}

// What every resident session keeps of its runtime stays within its size
// class (issue 29: a field added past one costs every session the next
// class; move node-wide values to the Builder, pack flags together).
func TestPerSessionStructSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"asks", unsafe.Sizeof(asks{}), 112},
		{"codeRuntime", unsafe.Sizeof(codeRuntime{}), 128},
		{"eventLog", unsafe.Sizeof(eventLog{}), 128},
		{"Runtime", unsafe.Sizeof(Runtime{}), 224},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d B, want at most %d", c.name, c.size, c.max)
		}
	}
}

package placement

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// echoGrain answers "identity:text" and reports its deactivations.
type echoGrain struct {
	id          string
	deactivated chan<- grain.Reason
}

func (g *echoGrain) Activate(context.Context, grain.Context, []byte) error { return nil }

func (g *echoGrain) Receive(_ context.Context, _ grain.Context, msg proto.Message) (proto.Message, error) {
	return wrapperspb.String(g.id + ":" + msg.(*wrapperspb.StringValue).GetValue()), nil
}

func (g *echoGrain) Deactivate(_ context.Context, _ grain.Context, reason grain.Reason) {
	g.deactivated <- reason
}

// placementNode is node "a" of a view where it hosts kind "echo" and node
// "b" hosts kind "far": a placement actor in a local actor system (no
// network, no store: "echo" is ephemeral).
type placementNode struct {
	t           *testing.T
	system      *actor.ActorSystem
	pid         *actor.PID
	deactivated chan grain.Reason
}

func startPlacement(t *testing.T) *placementNode {
	t.Helper()
	n := &placementNode{t: t, system: actor.NewActorSystem(), deactivated: make(chan grain.Reason, 16)}
	self := member("a", "127.0.0.1:7001", "echo")
	kinds := map[string]grain.Kind{"echo": {Name: "echo", Ephemeral: true, New: func(id string) grain.Grain {
		return &echoGrain{id: id, deactivated: n.deactivated}
	}}}
	AnswerDeadLetters(n.system)
	n.pid = n.system.Root.Spawn(Props(Config{Self: self, Kinds: kinds, Metrics: NewMetrics(prometheus.NewRegistry())}))
	t.Cleanup(func() { n.system.Shutdown() })
	n.system.Root.Send(n.pid, &ViewChanged{View: membership.NewView(self, member("b", "127.0.0.1:7002", "far"))})
	return n
}

// ask sends a local request and returns the placement's answer.
func (n *placementNode) ask(req *LocalRequest) *LocalReply {
	n.t.Helper()
	res, err := n.system.Root.RequestFuture(n.pid, req, 10*time.Second).Result()
	if err != nil {
		n.t.Fatalf("request %s/%s: %v", req.Kind, req.Identity, err)
	}
	return res.(*LocalReply)
}

// askReply sends a local request without a sender, as a node does, and
// returns the answer its Reply receives.
func (n *placementNode) askReply(req *LocalRequest) Answer {
	n.t.Helper()
	req.Reply = NewReply()
	n.system.Root.Send(n.pid, req)
	select {
	case a := <-req.Reply:
		return a
	case <-time.After(10 * time.Second):
		n.t.Fatalf("request %s/%s: no answer on its Reply", req.Kind, req.Identity)
		return Answer{}
	}
}

func (n *placementNode) stats() *StatsReply {
	n.t.Helper()
	res, err := n.system.Root.RequestFuture(n.pid, &Stats{}, 10*time.Second).Result()
	if err != nil {
		n.t.Fatal(err)
	}
	return res.(*StatsReply)
}

// waitDeactivated waits for the grain's Deactivate and returns its reason.
func (n *placementNode) waitDeactivated() grain.Reason {
	n.t.Helper()
	select {
	case r := <-n.deactivated:
		return r
	case <-time.After(10 * time.Second):
		n.t.Fatal("the grain was not deactivated")
		return ""
	}
}

// The placement actor's routing decisions for one request: a kind no
// member hosts is refused as unknown; a grain another member owns, once
// the request was forwarded as often as allowed, is refused as not owned
// (views disagree); a grain this node owns is activated and answers.
func TestPlacementRoutesEachRequestByOwner(t *testing.T) {
	n := startPlacement(t)
	for _, tc := range []struct {
		name     string
		req      *LocalRequest
		wantCode pb.GrainError_Code // UNSPECIFIED: answered by the grain
		want     string
	}{
		{"kind no member hosts", &LocalRequest{Kind: "nobody", Identity: "g1", Msg: wrapperspb.String("hi")}, pb.GrainError_CODE_UNKNOWN_KIND, ""},
		{"another member's grain after the last hop", &LocalRequest{Kind: "far", Identity: "g1", Msg: wrapperspb.String("hi"), Hops: 2}, pb.GrainError_CODE_NOT_OWNER, ""},
		{"this node's grain", &LocalRequest{Kind: "echo", Identity: "g1", Msg: wrapperspb.String("hi")}, pb.GrainError_CODE_UNSPECIFIED, "g1:hi"},
	} {
		r := n.ask(tc.req)
		// The same request answered on a Reply instead of its sender.
		byReply := *tc.req
		if a := n.askReply(&byReply); a.Remote != nil || a.Failed != nil || !proto.Equal(a.Msg, r.Msg) || (a.Err == nil) != (r.Err == nil) || (a.Err != nil && a.Err.Code != r.Err.Code) {
			t.Errorf("%s: on a Reply %+v, to the sender %+v", tc.name, a, r)
		}
		if tc.wantCode != pb.GrainError_CODE_UNSPECIFIED {
			if r.Err == nil || r.Err.Code != tc.wantCode || r.Msg != nil {
				t.Errorf("%s: %+v, want error %v", tc.name, r, tc.wantCode)
			}
			continue
		}
		if r.Err != nil || r.Msg.(*wrapperspb.StringValue).GetValue() != tc.want {
			t.Errorf("%s: %+v, want %q", tc.name, r, tc.want)
		}
	}
	if s := n.stats(); len(s.Active) != 1 || s.Active[0] != grain.Key("echo", "g1") {
		t.Fatalf("activations %+v, want only echo/g1", s)
	}
}

// A view in which another member owns an active grain deactivates it
// (reason rebalance); the next request for it is routed by the new view.
func TestViewChangeDeactivatesGrainsThatMoved(t *testing.T) {
	n := startPlacement(t)
	if r := n.ask(&LocalRequest{Kind: "echo", Identity: "g1", Msg: wrapperspb.String("hi")}); r.Err != nil {
		t.Fatalf("first request: %v", r.Err)
	}
	n.system.Root.Send(n.pid, &ViewChanged{View: membership.NewView(member("a", "127.0.0.1:7001"), member("b", "127.0.0.1:7002", "echo"))})
	if r := n.waitDeactivated(); r != grain.ReasonRebalance {
		t.Fatalf("deactivated for %q, want %q", r, grain.ReasonRebalance)
	}
	// Now b owns it: a request that already used its hops is refused
	// rather than served here.
	if r := n.ask(&LocalRequest{Kind: "echo", Identity: "g1", Msg: wrapperspb.String("hi"), Hops: 2}); r.Err == nil || r.Err.Code != pb.GrainError_CODE_NOT_OWNER {
		t.Fatalf("request after the move: %+v, want NOT_OWNER", r)
	}
}

// Draining deactivates every grain (reason shutdown) and answers Drained
// once none is left.
func TestDrainDeactivatesEveryGrainThenAnswers(t *testing.T) {
	n := startPlacement(t)
	for _, id := range []string{"g1", "g2"} {
		if r := n.ask(&LocalRequest{Kind: "echo", Identity: id, Msg: wrapperspb.String("hi")}); r.Err != nil {
			t.Fatalf("%s: %v", id, r.Err)
		}
	}
	res, err := n.system.Root.RequestFuture(n.pid, &Drain{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if _, ok := res.(*Drained); !ok {
		t.Fatalf("drain answered %T", res)
	}
	for range 2 {
		if r := n.waitDeactivated(); r != grain.ReasonShutdown {
			t.Fatalf("deactivated for %q, want %q", r, grain.ReasonShutdown)
		}
	}
	if s := n.stats(); len(s.Active)+len(s.Stopping) != 0 {
		t.Fatalf("activations after the drain: %+v", s)
	}
}

// A request answered on its Reply learns that it reached no actor
// (actor.ErrDeadLetter, a retry for its caller), as a sender learns it
// from protoactor's DeadLetterResponse, instead of waiting for its timeout.
func TestLocalRequestToNoActorAnswersItsReply(t *testing.T) {
	n := startPlacement(t)
	req := &LocalRequest{Kind: "echo", Identity: "g1", Msg: wrapperspb.String("hi"), Reply: NewReply()}
	n.system.Root.Send(actor.NewPID(n.system.Address(), "no-such-actor"), req)
	select {
	case a := <-req.Reply:
		if !errors.Is(a.Failed, actor.ErrDeadLetter) {
			t.Fatalf("answer %+v, want actor.ErrDeadLetter", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer on the Reply")
	}
}

// A request answered on its Reply that the placement actor forwards to
// the owner on another node gets that node's answer (here: it cannot be
// reached, as this test system has no remote) on its Reply.
func TestForwardedLocalRequestAnswersItsReply(t *testing.T) {
	n := startPlacement(t)
	a := n.askReply(&LocalRequest{Kind: "far", Identity: "g1", Msg: wrapperspb.String("hi"), Timeout: 10 * time.Second})
	if !errors.Is(a.Failed, actor.ErrDeadLetter) {
		t.Fatalf("answer %+v, want the forward's actor.ErrDeadLetter", a)
	}
}

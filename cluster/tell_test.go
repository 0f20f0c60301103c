package cluster_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// heard is one message a recorder grain received.
type heard struct{ node, identity, text string }

// recorder reports every request it receives on heard; a *StringValue
// "relay:<identity>" makes it ask, through its Context, the recorder of
// that identity to record "relayed".
type recorder struct{ heard chan<- heard }

func (r recorder) Activate(context.Context, grain.Context, []byte) error { return nil }

func (r recorder) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	text := msg.(*wrapperspb.StringValue).GetValue()
	r.heard <- heard{node: g.Node(), identity: g.Identity(), text: text}
	if to, ok := strings.CutPrefix(text, "relay:"); ok {
		return g.Request(ctx, "recorder", to, wrapperspb.String("relayed"))
	}
	return &emptypb.Empty{}, nil
}

func (r recorder) Deactivate(context.Context, grain.Context, grain.Reason) {}

// startRecorders starts n nodes hosting the recorder kind (built by a
// grain.Host, which must be handed the node it is built for).
func startRecorders(t *testing.T, n int) ([]*cluster.Node, <-chan heard) {
	t.Helper()
	if raceDetector && n > 1 {
		t.Skip("several protoactor remotes in one process trip a race inside grpclog.SetLoggerV2 (see startCluster)")
	}
	ch := make(chan heard, 64)
	net, st := membership.NewNetwork(), openStore(t)
	var nodes []*cluster.Node
	for range n {
		var handed grain.Cluster
		host := func(_ context.Context, c grain.Cluster) ([]grain.Kind, error) {
			handed = c
			return []grain.Kind{{Name: "recorder", Ephemeral: true, New: func(string) grain.Grain { return recorder{heard: ch} }}}, nil
		}
		node := startNode(t, cluster.Config{Hosts: []grain.Host{host}, Membership: net.Provider(), Store: st, AttemptTimeout: attemptTimeout})
		if handed != grain.Cluster(node) {
			t.Fatalf("the host of %s was handed %v, not its node", node.ID(), handed)
		}
		nodes = append(nodes, node)
	}
	tc := &testCluster{net: net, nodes: nodes}
	tc.awaitConverged(t)
	return nodes, ch
}

func await(t *testing.T, ch <-chan heard) heard {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(conditionWait):
		t.Fatal("no message heard")
		return heard{}
	}
}

func TestBroadcastReachesOneGrainOnEveryOtherMember(t *testing.T) {
	nodes, ch := startRecorders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := nodes[0].Broadcast(ctx, "recorder", wrapperspb.String("hello"), grain.Idempotent()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		h := await(t, ch)
		if h.text != "hello" {
			t.Fatalf("heard %+v, want the broadcast", h)
		}
		got = append(got, h.node)
	}
	slices.Sort(got)
	want := []string{nodes[1].ID(), nodes[2].ID()}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("broadcast reached %v, want every other member %v", got, want)
	}
	select {
	case h := <-ch:
		t.Fatalf("the broadcast reached a grain more than once per member: %+v", h)
	default:
	}
}

func TestGrainRequestsAndTellsThroughItsContext(t *testing.T) {
	nodes, ch := startRecorders(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := nodes[0].Request(ctx, "recorder", "a", wrapperspb.String("relay:b")); err != nil {
		t.Fatal(err)
	}
	if h := await(t, ch); h.identity != "a" {
		t.Fatalf("heard %+v first, want the relay request at a", h)
	}
	if h := await(t, ch); h.identity != "b" || h.text != "relayed" {
		t.Fatalf("heard %+v, want b to have been asked by a through a's grain context", h)
	}
	nodes[0].Tell(ctx, "recorder", "c", wrapperspb.String("told"))
	if h := await(t, ch); h.identity != "c" || h.text != "told" {
		t.Fatalf("heard %+v, want the tell at c", h)
	}
}

package placement

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// An activation is started as a creation (it takes ownership without
// looking for the grain's row) only for a CreatedByWrite kind, a request
// from this node, and a first message the kind says creates it.
func TestCreatesDecidesFromKindAndFirstRequest(t *testing.T) {
	isCreate := func(m proto.Message) bool { return m.(*wrapperspb.StringValue).GetValue() == "create" }
	create, other := wrapperspb.String("create"), wrapperspb.String("read")
	for _, tc := range []struct {
		name  string
		kind  grain.Kind
		first any
		want  bool
	}{
		{"created-by-write kind, creating local request", grain.Kind{CreatedByWrite: true, Creates: isCreate}, &LocalRequest{Msg: create}, true},
		{"created-by-write kind, other local request", grain.Kind{CreatedByWrite: true, Creates: isCreate}, &LocalRequest{Msg: other}, false},
		{"created-by-write kind, remote request (not decoded)", grain.Kind{CreatedByWrite: true, Creates: isCreate}, &pb.GrainRequest{}, false},
		{"created-by-write kind without Creates", grain.Kind{CreatedByWrite: true}, &LocalRequest{Msg: create}, false},
		{"kind that is not created by a write", grain.Kind{Creates: isCreate}, &LocalRequest{Msg: create}, false},
	} {
		if got := creates(&tc.kind, tc.first); got != tc.want {
			t.Errorf("%s: creates = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// What a grain answered becomes its caller's reply or a grain error with
// the code the caller acts on (retry elsewhere, store trouble, bug), and
// always the node that answered.
func TestClassifyMapsAnswersToRepliesAndErrorCodes(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reply := wrapperspb.String("ok")
	for _, tc := range []struct {
		name     string
		reply    proto.Message
		err      error
		wantCode pb.GrainError_Code // UNSPECIFIED: the reply goes through
		wantNode string
	}{
		{"a reply", reply, nil, pb.GrainError_CODE_UNSPECIFIED, ""},
		{"no reply and no error", nil, nil, pb.GrainError_CODE_INTERNAL, "n1"},
		{"a grain error keeps its code and gets the node", nil, &grain.Error{Code: pb.GrainError_CODE_NOT_OWNER, Message: "moved"}, pb.GrainError_CODE_NOT_OWNER, "n1"},
		{"a grain error from another node keeps that node", nil, &grain.Error{Code: pb.GrainError_CODE_OVERLOADED, Node: "n2"}, pb.GrainError_CODE_OVERLOADED, "n2"},
		{"a wrapped grain error", nil, fmt.Errorf("handler: %w", &grain.Error{Code: pb.GrainError_CODE_REJECTED}), pb.GrainError_CODE_REJECTED, "n1"},
		{"the store unavailable", nil, fmt.Errorf("commit: %w", store.ErrUnavailable), pb.GrainError_CODE_STORE_UNAVAILABLE, "n1"},
		{"any other error", nil, errors.New("boom"), pb.GrainError_CODE_INTERNAL, "n1"},
	} {
		got, ge := classify(func() *slog.Logger { return logger }, "n1", tc.reply, tc.err)
		if tc.wantCode == pb.GrainError_CODE_UNSPECIFIED {
			if ge != nil || got != tc.reply {
				t.Errorf("%s: got %v / %v, want the reply", tc.name, got, ge)
			}
			continue
		}
		if got != nil || ge == nil || ge.Code != tc.wantCode || ge.Node != tc.wantNode {
			t.Errorf("%s: got %v / %+v, want code %v from node %s", tc.name, got, ge, tc.wantCode, tc.wantNode)
		}
	}
}

// While its node drains, the placement actor routes every grain to the
// owner it will have once the node is gone: never to itself, and to the
// same member as the table without the node; before draining it routes
// by the full table.
func TestOwnerWhileDrainingLeavesThisNodeOut(t *testing.T) {
	view := threeNodes()
	self := view.Members[0]
	p := &placementActor{cfg: &Config{Self: self}, table: NewTable(view)}
	without := NewTable(withoutMember(view, self.ID))
	ownedBySelf := 0
	for i := range 300 {
		id := fmt.Sprintf("g-%d", i)
		before, _ := p.owner("session", id)
		if want, _ := p.table.Owner("session", id); before.ID != want.ID {
			t.Fatalf("%s: owner %s before draining, table says %s", id, before.ID, want.ID)
		}
		if before.ID == self.ID {
			ownedBySelf++
		}
		p.draining = true
		during, ok := p.owner("session", id)
		p.draining = false
		want, _ := without.Owner("session", id)
		if !ok || during.ID == self.ID || during.ID != want.ID {
			t.Fatalf("%s: owner %s while draining (ok %v), want %s", id, during.ID, ok, want.ID)
		}
		if before.ID != self.ID && during.ID != before.ID {
			t.Fatalf("%s: draining %s moved a grain it did not own (%s -> %s)", id, self.ID, before.ID, during.ID)
		}
	}
	if ownedBySelf == 0 {
		t.Fatal("the draining node owned none of 300 grains: the test checks nothing")
	}
}

// withoutMember drops exactly the named member.
func TestWithoutMember(t *testing.T) {
	view := threeNodes()
	for _, tc := range []struct {
		drop string
		want []string
	}{
		{"a", []string{"b", "c"}},
		{"c", []string{"a", "b"}},
		{"zz", []string{"a", "b", "c"}},
	} {
		var got []string
		for _, m := range withoutMember(view, tc.drop).Members {
			got = append(got, m.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("without %s: %v, want %v", tc.drop, got, tc.want)
		}
	}
}

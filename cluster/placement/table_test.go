package placement

import (
	"fmt"
	"math"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

func member(id, addr string, kinds ...string) membership.Member {
	return membership.Member{ID: id, Address: addr, Kinds: kinds}
}

func threeNodes() membership.View {
	return membership.NewView(
		member("a", "127.0.0.1:7001", "session", "probe"),
		member("b", "127.0.0.1:7002", "session", "probe"),
		member("c", "127.0.0.1:7003", "session", "probe"),
	)
}

func TestOwnerIsDeterministicAndIndependentOfMemberOrder(t *testing.T) {
	v1 := threeNodes()
	v2 := membership.NewView(v1.Members[2], v1.Members[0], v1.Members[1])
	t1, t2 := NewTable(v1), NewTable(v2)
	for i := range 1000 {
		id := fmt.Sprintf("s-%d", i)
		o1, ok1 := t1.Owner("session", id)
		o2, ok2 := t2.Owner("session", id)
		if !ok1 || !ok2 || o1.ID != o2.ID {
			t.Fatalf("owner of %s differs: %v vs %v", id, o1.ID, o2.ID)
		}
	}
}

func TestOwnerOnlyAmongMembersHostingKind(t *testing.T) {
	v := membership.NewView(
		member("a", "127.0.0.1:7001", "session"),
		member("b", "127.0.0.1:7002", "probe"),
		member("gw", "127.0.0.1:7003"),
	)
	tb := NewTable(v)
	for i := range 200 {
		id := fmt.Sprint(i)
		if o, _ := tb.Owner("session", id); o.ID != "a" {
			t.Fatalf("session %s owned by %s, want a (only host)", id, o.ID)
		}
		if o, _ := tb.Owner("probe", id); o.ID != "b" {
			t.Fatalf("probe %s owned by %s, want b", id, o.ID)
		}
	}
	if _, ok := tb.Owner("nope", "x"); ok {
		t.Fatal("unhosted kind must have no owner")
	}
	if tb.Hosts("nope") || !tb.Hosts("probe") {
		t.Fatal("Hosts is wrong")
	}
	if _, ok := NewTable(membership.View{}).Owner("session", "x"); ok {
		t.Fatal("empty view must have no owner")
	}
}

func TestDistributionIsBalanced(t *testing.T) {
	tb := NewTable(threeNodes())
	const n = 30000
	counts := map[string]int{}
	for i := range n {
		o, _ := tb.Owner("session", fmt.Sprintf("%032x", i*2654435761))
		counts[o.ID]++
	}
	for id, c := range counts {
		share := float64(c) / n
		if math.Abs(share-1.0/3) > 0.02 {
			t.Fatalf("member %s owns %.3f of identities, want 0.333±0.02 (%v)", id, share, counts)
		}
	}
}

// Only the grains of a leaving member move, and only grains that move to a
// joining member move on join: the minimal-disruption property.
func TestMembershipChangeMovesOnlyAffectedGrains(t *testing.T) {
	full := threeNodes()
	without := membership.NewView(full.Members[0], full.Members[1])
	tFull, tWithout := NewTable(full), NewTable(without)
	moved := 0
	const n = 9000
	for i := range n {
		id := fmt.Sprintf("id-%d", i)
		before, _ := tFull.Owner("session", id)
		after, _ := tWithout.Owner("session", id)
		if before.ID != "c" && before.ID != after.ID {
			t.Fatalf("%s moved from surviving member %s to %s", id, before.ID, after.ID)
		}
		if before.ID != after.ID {
			moved++
		}
	}
	if share := float64(moved) / n; math.Abs(share-1.0/3) > 0.03 {
		t.Fatalf("moved share %.3f, want about 1/3", share)
	}
}

// A member that restarts with a new ID on the same address keeps its grains.
func TestOwnershipFollowsAddressNotID(t *testing.T) {
	v1 := threeNodes()
	restarted := v1.Members[1]
	restarted.ID = "b-restarted"
	v2 := membership.NewView(v1.Members[0], restarted, v1.Members[2])
	t1, t2 := NewTable(v1), NewTable(v2)
	for i := range 1000 {
		id := fmt.Sprint("k", i)
		o1, _ := t1.Owner("session", id)
		o2, _ := t2.Owner("session", id)
		if o1.Address != o2.Address {
			t.Fatalf("%s moved from %s to %s after an ID-only change", id, o1.Address, o2.Address)
		}
	}
}

func BenchmarkOwner3(b *testing.B) {
	tb := NewTable(threeNodes())
	for i := 0; b.Loop(); i++ {
		tb.Owner("session", "0123456789abcdef0123456789abcdef")
	}
}

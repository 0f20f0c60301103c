package chaos

import (
	"slices"
	"testing"
)

func TestDeployOnce(t *testing.T) {
	ok := DeployOp{Service: "a", Accept: true, Answered: true, Result: "deployed a 1, approved by x"}
	no := DeployOp{Service: "b", Answered: true, Result: `deploy of b 1 declined by "x": no`}
	unknown := DeployOp{Service: "c", Accept: true}
	for _, tc := range []struct {
		name string
		ops  []DeployOp
		log  []string
		want []string
	}{
		{"clean", []DeployOp{ok, no, unknown}, []string{"requested a 1", "deployed a 1", "requested b 1", "requested c 1"}, nil},
		{"an unknown outcome applied once", []DeployOp{unknown}, []string{"deployed c 1"}, nil},
		{"twice", []DeployOp{ok}, []string{"deployed a 1", "deployed a 1"}, []string{"deploy a: deployed 2 times"}},
		{"an unknown outcome twice", []DeployOp{unknown}, []string{"deployed c 1", "deployed c 1"}, []string{"deploy c: deployed 2 times"}},
		{"declined yet deployed", []DeployOp{no}, []string{"deployed b 1"}, []string{"deploy b: declined, yet deployed"}},
		{"a declined one unanswered, deployed", []DeployOp{{Service: "b"}}, []string{"deployed b 1"}, []string{"deploy b: declined, yet deployed"}},
		{"answered, never deployed", []DeployOp{ok}, nil, []string{`deploy a: answered "deployed a 1, approved by x", yet never deployed`}},
		{"the wrong answer", []DeployOp{{Service: "a", Accept: true, Answered: true, Result: "deploy of a 1 declined"}}, []string{"deployed a 1"},
			[]string{`deploy a: answered "deploy of a 1 declined", want "deployed a "...`}},
		{"never asked for", nil, []string{"deployed z 1"}, []string{"deploy z: deployed, never asked for"}},
	} {
		if got := DeployOnce(tc.ops, tc.log); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if s, a, d, u := DeployCounts([]DeployOp{ok, no, unknown}); s != 3 || a != 1 || d != 1 || u != 1 {
		t.Errorf("counts %d %d %d %d, want 3 1 1 1", s, a, d, u)
	}
}

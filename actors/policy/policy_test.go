package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"demo.createTodo", "demo.createTodo", true},
		{"demo.createTodo", "demo.createTodos", false},
		{"demo.*", "demo.createTodo", true},
		{"demo.*", "demox.createTodo", false},
		{"*", "anything.at.all", true},
		{"*.delete*", "github.deleteRepo", true},
		{"*.delete*", "github.repos.deleteRepo", true},
		{"*.delete*", "github.createRepo", false},
		{"demo.?etTodo", "demo.getTodo", true},
		{"demo.?etTodo", "demo.setTodo", true},
		{"demo.?etTodo", "demo.etTodo", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"**", "", true},
	}
	for _, tc := range cases {
		if got := match(strings.Split(tc.pattern, "*"), tc.path); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	set, err := New([]Rule{
		{Pattern: "demo.listTodos", Action: Approve},                                 // global
		{Pattern: "demo.*", Action: RequireApproval, Org: "acme", Position: 2},       // org, second
		{Pattern: "demo.createTodo", Action: Approve, Org: "acme", Position: 1},      // org, first: wins within acme
		{Pattern: "demo.deleteTodo", Action: Block, Org: "acme", User: "intern"},     // user
		{Pattern: "github.*", Action: Block, Org: "other"},                           // another org
		{Pattern: "demo.getTodo", Action: RequireApproval, Org: "acme", User: "bob"}, // user stricter than default
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		path       string
		org, user  string
		defaultReq bool
		want       Action
		owner      string
	}{
		{"no rule: GET default approves", "crm.listContacts", "acme", "alice", false, Approve, "default"},
		{"no rule: POST default requires", "crm.createContact", "zeta", "alice", true, RequireApproval, "default"},
		{"org first match by position", "demo.createTodo", "acme", "alice", true, Approve, "org:acme"},
		{"org later rule for other ops", "demo.deleteTodo", "acme", "alice", true, RequireApproval, "org:acme"},
		{"most restrictive across owners", "demo.deleteTodo", "acme", "intern", true, Block, "user:acme/intern"},
		{"global approve loses to org require", "demo.listTodos", "acme", "alice", false, RequireApproval, "org:acme"},
		{"global rule alone", "demo.listTodos", "zeta", "alice", false, Approve, "global"},
		{"rules of another org do not apply", "github.deleteRepo", "acme", "alice", true, RequireApproval, "default"},
		{"block in own org", "github.deleteRepo", "other", "x", true, Block, "org:other"},
		{"user rule for one user only", "demo.getTodo", "acme", "carol", false, RequireApproval, "org:acme"},
		{"a matching approve overrides the source default", "demo.createTodo", "acme", "bob", true, Approve, "org:acme"},
		{"no org: only global rules", "demo.deleteTodo", "", "", true, RequireApproval, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := set.Evaluate(tc.path, tc.org, tc.user, tc.defaultReq)
			if d.Action != tc.want || d.Owner != tc.owner {
				t.Fatalf("Evaluate = %+v, want %v by %s", d, tc.want, tc.owner)
			}
		})
	}
	var empty *Set
	if d := empty.Evaluate("x.y", "o", "u", true); d.Action != RequireApproval {
		t.Fatalf("nil set: %+v", d)
	}
}

func TestNewRejectsBadRules(t *testing.T) {
	_, err := New([]Rule{{Pattern: "", Action: Block}, {Pattern: "x", Action: 0}, {Pattern: "y", Action: Block, User: "u"}})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"rule 0", "rule 1", "rule 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "p.json")
	_ = os.WriteFile(good, []byte(`{"rules":[{"pattern":"demo.*","action":"block","org":"acme"}]}`), 0o600)
	set, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if d := set.Evaluate("demo.x", "acme", "a", false); d.Action != Block {
		t.Fatalf("loaded rule not applied: %+v", d)
	}
	for name, body := range map[string]string{
		"bad action":    `{"rules":[{"pattern":"x","action":"maybe"}]}`,
		"unknown field": `{"rules":[{"pattern":"x","action":"block","when":"always"}]}`,
		"not json":      `{rules`,
	} {
		p := filepath.Join(dir, name+".json")
		_ = os.WriteFile(p, []byte(body), 0o600)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: err %v, want an error naming the file", name, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("demo.*", "demo.createTodo")
	f.Add("a*b?c", "aXbYc")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		got := match(strings.Split(pattern, "*"), path)
		if !strings.ContainsAny(pattern, "*?") && got != (pattern == path) {
			t.Fatalf("literal pattern %q vs %q: %v", pattern, path, got)
		}
		if pattern == "*" && !got {
			t.Fatalf("* did not match %q", path)
		}
	})
}

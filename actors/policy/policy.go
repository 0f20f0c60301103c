// Package policy decides, for one tool call, whether it runs, waits for a
// human approval, or is refused: executor's approve | require_approval |
// block rules.
//
// Rules belong to owners: the whole installation (no org), an organization,
// or a user within an organization. Each owner that applies to the caller
// contributes its first matching rule (by position); the most restrictive
// contribution wins (block > require_approval > approve). When no rule
// matches, the tool's default applies: require_approval for tools the
// source marks so (OpenAPI POST/PUT/PATCH/DELETE, upstream MCP tools not
// marked readOnlyHint), approve otherwise. An Approve rule is how an
// installation exempts such a tool it trusts.
//
// Evaluate is a pure function of the rules and its arguments.
//
//	set, _ := policy.New([]policy.Rule{
//		{Pattern: "demo.delete*", Action: policy.Block, Org: "acme"},
//		{Pattern: "demo.listTodos", Action: policy.Approve},
//	})
//	d := set.Evaluate("demo.deleteTodo", "acme", "alice", true) // d.Action == policy.Block
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Action is what a rule decides.
type Action int

// Actions, ordered from least to most restrictive.
const (
	Approve         Action = 1 // run without asking
	RequireApproval Action = 2 // pause until a human approves
	Block           Action = 3 // refuse
)

// String returns executor's name for a.
func (a Action) String() string {
	switch a {
	case Approve:
		return "approve"
	case RequireApproval:
		return "require_approval"
	case Block:
		return "block"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// ParseAction parses "approve", "require_approval" or "block".
func ParseAction(s string) (Action, error) {
	for _, a := range []Action{Approve, RequireApproval, Block} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("policy: unknown action %q (want approve, require_approval or block)", s)
}

// MarshalJSON implements json.Marshaler.
func (a Action) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (a *Action) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("policy: action must be a string: %w", err)
	}
	v, err := ParseAction(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Rule is one policy rule.
type Rule struct {
	// Pattern matches tool paths ("source.operation"); '*' matches any run
	// of characters (dots included), '?' one character.
	Pattern string `json:"pattern"`
	// Action is what the rule decides.
	Action Action `json:"action"`
	// Org scopes the rule to an organization; empty applies to every org.
	Org string `json:"org,omitempty"`
	// User scopes the rule to one user of Org (Org required).
	User string `json:"user,omitempty"`
	// Position orders the rules of one owner; the first match counts.
	Position float64 `json:"position,omitempty"`
}

// Decision is the outcome for one call.
type Decision struct {
	// Action to take.
	Action Action
	// Pattern of the deciding rule; empty when the tool's default decided.
	Pattern string
	// Owner of the deciding rule: "global", "org:<org>", "user:<org>/<user>"
	// or "default".
	Owner string
}

// Set is an immutable, validated set of rules.
type Set struct {
	owners map[string][]compiled // by owner key, sorted by position
}

type compiled struct {
	Rule
	parts []string // the pattern split at '*'
}

// New validates rules and builds a set.
func New(rules []Rule) (*Set, error) {
	s := &Set{owners: map[string][]compiled{}}
	var errs []error
	for i, r := range rules {
		switch {
		case r.Pattern == "":
			errs = append(errs, fmt.Errorf("policy: rule %d: empty pattern", i))
			continue
		case r.Action < Approve || r.Action > Block:
			errs = append(errs, fmt.Errorf("policy: rule %d (%q): no action", i, r.Pattern))
			continue
		case r.User != "" && r.Org == "":
			errs = append(errs, fmt.Errorf("policy: rule %d (%q): a user rule needs its org", i, r.Pattern))
			continue
		}
		key := ownerKey(r.Org, r.User)
		s.owners[key] = append(s.owners[key], compiled{Rule: r, parts: strings.Split(r.Pattern, "*")})
	}
	for _, rs := range s.owners {
		slices.SortStableFunc(rs, func(a, b compiled) int {
			switch {
			case a.Position < b.Position:
				return -1
			case a.Position > b.Position:
				return 1
			}
			return 0
		})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Load reads a JSON rules file: {"rules": [{"pattern": …, "action": …, …}]}.
func Load(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: read %s: %w", path, err)
	}
	var f struct {
		Rules []Rule `json:"rules"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy: %s: %w", path, err)
	}
	s, err := New(f.Rules)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", path, err)
	}
	return s, nil
}

func ownerKey(org, user string) string {
	switch {
	case org == "":
		return "global"
	case user == "":
		return "org:" + org
	}
	return "user:" + org + "/" + user
}

// Evaluate decides the call of tool path by user of org; defaultRequires
// is the tool source's default.
func (s *Set) Evaluate(path, org, user string, defaultRequires bool) Decision {
	best := Decision{Action: Approve, Owner: "default"}
	if defaultRequires {
		best.Action = RequireApproval
	}
	matched := false
	if s != nil {
		for _, key := range []string{"global", ownerKey(org, ""), ownerKey(org, user)} {
			if org == "" && key != "global" {
				continue
			}
			for _, r := range s.owners[key] {
				if !match(r.parts, path) {
					continue
				}
				if !matched || r.Action > best.Action {
					best = Decision{Action: r.Action, Pattern: r.Pattern, Owner: key}
				}
				matched = true
				break // an owner contributes its first match only
			}
		}
	}
	return best
}

// match reports whether s matches the pattern split at '*' (with '?'
// matching one character inside parts).
func match(parts []string, s string) bool {
	if len(parts) == 1 {
		return eq(parts[0], s)
	}
	if len(s) < len(parts[0]) || !eq(parts[0], s[:len(parts[0])]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && eq(last, s[len(s)-len(last):])
}

// eq compares a pattern part with '?' wildcards to s of the same length.
func eq(p, s string) bool {
	if len(p) != len(s) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '?' && p[i] != s[i] {
			return false
		}
	}
	return true
}

// index finds the first position of pattern part p (with '?') in s.
func index(s, p string) int {
	for i := 0; i+len(p) <= len(s); i++ {
		if eq(p, s[i:i+len(p)]) {
			return i
		}
	}
	return -1
}

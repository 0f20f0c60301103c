package systemtest

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// eventBudgetNode runs a node on the SQLite file dbPath with the event
// log's budgets of TestEventLogKeepsWhatAPrincipalStoresWithinItsBudget,
// and keys for alice and bob (acme) and carol (globex).
func eventBudgetNode(t *testing.T, dbPath string, maxEvent int, session, principal, stored int64) (app.Info, func() error) {
	t.Helper()
	keys, err := auth.NewKeys(
		auth.Entry{Token: aliceToken, User: "alice", Org: "acme", Role: "admin"},
		auth.Entry{Token: bobToken, User: "bob", Org: "acme", Role: "member"},
		auth.Entry{Token: carolToken, User: "carol", Org: "globex", Role: "admin"},
	)
	if err != nil {
		t.Fatal(err)
	}
	return startNodeStoppable(t, func(c *app.Config) {
		c.Store = "sqlite:" + dbPath
		c.MCP.Packs, c.MCP.Keys = []string{"demo"}, keys
		c.MCP.MaxEventBytes, c.MCP.SessionEventBytes = maxEvent, session
		c.MCP.PrincipalEventBytes, c.MCP.StoredEventBytes = principal, stored
	})
}

// echoStream is one answered echo: its session, request id and the id of
// its stream's first event (to resume from).
type echoStream struct {
	session string
	id      int
	firstID string
}

// echoSessions opens sessions for token on addr and has each answer calls
// echoes of n bytes (SSE answers, each kept in the event log), round by
// round; it returns the streams in the order they were answered.
func echoSessions(t *testing.T, addr, token string, sessions, calls, n int) []echoStream {
	t.Helper()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = connect(t, addr, token, "2025-11-25", nil).ID()
	}
	var out []echoStream
	for c := range calls {
		for _, s := range ids {
			id := 100 + c
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, strings.Repeat("e", n))
			r := raw(t, "POST", addr, map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json",
				"Accept": "application/json, text/event-stream", "Mcp-Session-Id": s, "Mcp-Protocol-Version": "2025-11-25"}, body)
			first := regexp.MustCompile(`(?m)^id: (\S+)$`).FindSubmatch(r.body)
			if r.status != 200 || first == nil || !strings.Contains(string(r.body), fmt.Sprintf(`"id":%d,"result"`, id)) {
				t.Fatalf("echo %d in %s: %d %.200s", id, s, r.status, r.body)
			}
			out = append(out, echoStream{session: s, id: id, firstID: string(first[1])})
		}
	}
	return out
}

// sessionsOf lists the sessions of streams, once each.
func sessionsOf(streams []echoStream) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range streams {
		if !seen[s.session] {
			seen[s.session] = true
			out = append(out, s.session)
		}
	}
	return out
}

// storedEvents measures, with SQL of its own on the node's SQLite file
// (not the store's counts), the bytes of the events of sessions (all
// sessions if none) and how many of them are at least min bytes.
func storedEvents(t *testing.T, dbPath string, minBytes int, sessions ...string) (bytes, large int64) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	where, args := "", []any{minBytes}
	if len(sessions) > 0 {
		where = " WHERE session IN (?" + strings.Repeat(", ?", len(sessions)-1) + ")"
		for _, s := range sessions {
			args = append(args, s)
		}
	}
	if err := db.QueryRow(`SELECT COALESCE(SUM(LENGTH(data)), 0), COALESCE(SUM(LENGTH(data) >= ?), 0) FROM mcp_events`+where, args...).Scan(&bytes, &large); err != nil {
		t.Fatal(err)
	}
	return bytes, large
}

// TestEventLogKeepsWhatAPrincipalStoresWithinItsBudget (issue 23, finding
// 5): each session's event log had a budget, but a principal opens as
// many sessions as it likes — answers of ~900 KiB over many sessions grew
// the SQLite file by 158 MB in 21 s (here, to scale: 60 KiB answers,
// budgets of 512 KiB a session and a principal, 1 MiB the store). What all the sessions of a principal
// store together now stays within the principal budget (oldest first,
// across its sessions), another principal's events are untouched by that
// trimming, and what the store keeps for everyone stays within the store
// budget. A stream whose events were trimmed gets its request answered
// with the retryable error; a recent stream still resumes. Bytes are
// measured in the SQLite file.
func TestEventLogKeepsWhatAPrincipalStoresWithinItsBudget(t *testing.T) {
	const (
		answer    = 60 << 10 // each echo's answer: just over 60 KiB kept (echo takes 64 KiB at most)
		session   = 512 << 10
		principal = 512 << 10
		stored    = 1 << 20
	)
	dbPath := filepath.Join(t.TempDir(), "events.db")
	info, stop := eventBudgetNode(t, dbPath, 2*answer, session, principal, stored)
	bob := sessionsOf(echoSessions(t, info.HTTPAddr, bobToken, 2, 2, answer))
	// 1.8 MiB over 10 sessions, each well within its own budget.
	alice := echoSessions(t, info.HTTPAddr, aliceToken, 10, 3, answer)
	if err := stop(); err != nil { // a graceful stop flushes and trims
		t.Fatal(err)
	}
	kept, _ := storedEvents(t, dbPath, answer, sessionsOf(alice)...)
	all, _ := storedEvents(t, dbPath, answer)
	t.Logf("after alice: her sessions keep %d bytes, the store %d", kept, all)
	if kept > principal || kept < principal/2 {
		t.Fatalf("alice's 10 sessions keep %d bytes of events, want at most the principal budget %d (and most of it)", kept, principal)
	}
	if _, large := storedEvents(t, dbPath, answer, bob...); large != 4 {
		t.Fatalf("bob's sessions keep %d of their 4 answers, want all: trimming alice touched bob", large)
	}

	// Another node on the same store: alice's oldest stream was trimmed,
	// her newest resumes; carol (another organization) writes 1.8 MiB, and
	// the store keeps at most its budget, dropping the oldest first.
	info, stop = eventBudgetNode(t, dbPath, 2*answer, session, principal, stored)
	resume := func(s echoStream) rawResponse {
		return raw(t, "GET", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + aliceToken, "Accept": "text/event-stream",
			"Mcp-Session-Id": s.session, "Mcp-Protocol-Version": "2025-11-25", "Last-Event-ID": s.firstID}, "")
	}
	if r := resume(alice[0]); r.status != 200 || !strings.Contains(string(r.body), fmt.Sprintf(`"id":%d`, alice[0].id)) ||
		!strings.Contains(string(r.body), "-32001") || strings.Contains(string(r.body), `"result"`) {
		t.Fatalf("resuming alice's oldest (trimmed) stream: %d %.300s, want its request answered with the retryable -32001", r.status, r.body)
	}
	if last := alice[len(alice)-1]; !strings.Contains(string(resume(last).body), fmt.Sprintf(`"id":%d,"result"`, last.id)) {
		t.Fatalf("alice's newest stream did not resume")
	}
	carol := sessionsOf(echoSessions(t, info.HTTPAddr, carolToken, 10, 3, answer))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	all, _ = storedEvents(t, dbPath, answer)
	t.Logf("after carol: the store keeps %d bytes", all)
	if all > stored {
		t.Fatalf("the store keeps %d bytes of events, over its budget %d", all, stored)
	}
	if kept, _ := storedEvents(t, dbPath, answer, carol...); kept > principal || kept < principal/2 {
		t.Fatalf("carol's sessions keep %d bytes, want at most the principal budget %d (and most of it)", kept, principal)
	}
	if _, large := storedEvents(t, dbPath, answer, bob...); large != 0 {
		t.Fatalf("bob's answers, the oldest in the store, were kept (%d) while the store was over its budget", large)
	}
}

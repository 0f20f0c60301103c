package systemtest

import (
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// TestDemoAPIIsPerOrganization: the demo to-do API of a node with code
// mode keeps one list per organization. alice (acme) creates a to-do
// through code mode; carol (globex) sees none of it — over HTTP with her
// token, and from her own code — and her own write lands in globex's list;
// acme's principals see acme's one to-do. A request without a valid token
// is refused.
func TestDemoAPIIsPerOrganization(t *testing.T) {
	info := startCodeNode(t, nil)
	base := "http://" + info.HTTPAddr
	alice := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, alice, "waiting_for_interaction")
	if r := api(t, "POST", base+"/api/executions/"+id+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	if res, sc := callTool(t, alice, "resume", map[string]any{"executionId": id}); res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
	for _, tok := range []string{aliceToken, bobToken} {
		if got := todos(t, info.HTTPAddr, tok); len(got) != 1 || got[0]["title"] != "ship it" || got[0]["id"] != "1" {
			t.Fatalf("acme's list: %v", got)
		}
	}

	// Another organization: an empty list, and alice's id is not found,
	// over HTTP and from code.
	if got := todos(t, info.HTTPAddr, carolToken); len(got) != 0 {
		t.Fatalf("globex sees acme's to-dos: %v", got)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if r := api(t, method, base+"/demo/todos/1", carolToken, ""); r.status != 404 {
			t.Fatalf("globex %s acme's to-do: %d %v, want 404", method, r.status, r.body)
		}
	}
	carol := connectMode(t, info.HTTPAddr, carolToken, "")
	res, sc := callTool(t, carol, "execute", map[string]any{"code": `const all = await tools.demo.listTodos({});
let one = "found";
try { await tools.demo.getTodo({id: "1"}); } catch (e) { one = String(e); }
return {n: all.length, one};`})
	if r, _ := sc["result"].(map[string]any); res.IsError || r["n"] != float64(0) || !strings.Contains(r["one"].(string), "404") {
		t.Fatalf("globex's code: %s %v, want no to-dos and 404", mcpclient.Text(res), sc)
	}
	if r := api(t, "POST", base+"/demo/todos", carolToken, `{"title":"globex's own"}`); r.status != 201 || r.body["id"] != "1" {
		t.Fatalf("globex creates: %d %v, want 201 with its own id 1", r.status, r.body)
	}
	if got := todos(t, info.HTTPAddr, carolToken); len(got) != 1 || got[0]["title"] != "globex's own" {
		t.Fatalf("globex's list: %v", got)
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("acme's list after globex's write: %v", got)
	}

	// No token, or an unknown one: 401 on every operation.
	for _, tok := range []string{"", "mcpg_nobody_0123456789"} {
		for _, op := range [][2]string{{"GET", "/demo/todos"}, {"POST", "/demo/todos"}, {"GET", "/demo/todos/1"}, {"DELETE", "/demo/todos/1"}} {
			body := ""
			if op[0] == "POST" {
				body = `{"title":"anonymous"}`
			}
			if r := api(t, op[0], base+op[1], tok, body); r.status != 401 {
				t.Fatalf("%s %s with token %q: %d %v, want 401", op[0], op[1], tok, r.status, r.body)
			}
		}
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 {
		t.Fatalf("acme's list after the refused requests: %v", got)
	}
}

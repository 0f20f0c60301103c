package mcpgrain_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// The principals of the in-band tests: org acme's admin, member and
// viewer, and globex's admin.
var inBandKeys = map[string]struct{ user, org, role, token string }{
	"ada": {"ada", "acme", "admin", "mcpg_ib_ada_admin_0123456789"},
	"meg": {"meg", "acme", "member", "mcpg_ib_meg_member_012345678"},
	"vic": {"vic", "acme", "viewer", "mcpg_ib_vic_viewer_012345678"},
	"eve": {"eve", "globex", "admin", "mcpg_ib_eve_admin_0123456789"},
}

// inBandTools: ship asks (blocking) with ClientMayDecide; ship_later asks
// with AskLater, ClientMayDecide as told; decide decides a pending
// question in band; status reads it. Each answers "state accepted by" or
// the error's text.
func inBandTools(s *mcp.Server) {
	type laterArgs struct {
		InBand bool `json:"inBand"`
	}
	type decideArgs struct {
		ID     string `json:"id"`
		Accept bool   `json:"accept"`
	}
	answer := func(st mcpgrain.PendingStatus, err error) (*mcp.CallToolResult, any, error) {
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%s %v %s", st.State, st.Decision.Accepted, st.Decision.By)), nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ship"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{Summary: "Ship it?", ClientMayDecide: true})
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%v %s", d.Accepted, d.By)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ship_later"}, func(ctx context.Context, req *mcp.CallToolRequest, args laterArgs) (*mcp.CallToolResult, any, error) {
		p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{Summary: fmt.Sprintf("Ship later (in band %v)?", args.InBand), ClientMayDecide: args.InBand})
		if err != nil {
			return nil, nil, err
		}
		return textResult(p.ID), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "decide"}, func(ctx context.Context, req *mcp.CallToolRequest, args decideArgs) (*mcp.CallToolResult, any, error) {
		return answer(mcpgrain.DecideAsk(ctx, req, args.ID, mcpgrain.Answer{Accept: args.Accept}))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "status"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct {
		ID string `json:"id"`
	}) (*mcp.CallToolResult, any, error) {
		return answer(mcpgrain.AskStatus(ctx, req, args.ID))
	})
}

// runKeyedNode runs s as a dev node with the in-band keys and returns its
// origin once it answers.
func runKeyedNode(t *testing.T, s mcpgrain.Server) string {
	t.Helper()
	var keys []string
	for _, k := range inBandKeys {
		keys = append(keys, fmt.Sprintf(`{"token":%q,"user":%q,"org":%q,"role":%q}`, k.token, k.user, k.org, k.role))
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, []byte(`{"keys":[`+strings.Join(keys, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return runDevNode(t, s, "/healthz", "--keys-file", path)
}

// connectAs connects who's go-sdk client (at 2025-11-25, with form
// elicitation) whose user answers every elicitation with answer and
// reports the question on asked.
func connectAs(t *testing.T, origin, who string, answer string, asked chan<- string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "inband-test"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select {
			case asked <- req.Params.Message:
			default:
			}
			return &mcp.ElicitResult{Action: answer}, nil
		},
	})
	hc := &http.Client{Transport: mcpclient.Bearer(inBandKeys[who].token, http.DefaultTransport)}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// decideOverHTTP decides execution id as who on the HTTP approval API and
// returns the status code.
func decideOverHTTP(t *testing.T, origin, who, id, action string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, origin+"/api/executions/"+id+"/resume", strings.NewReader(`{"action":"`+action+`"}`))
	req.Header.Set("Authorization", "Bearer "+inBandKeys[who].token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// pendingAs is the id of the question listed to who with message want,
// waited for.
func pendingAs(t *testing.T, origin, who, want string) string {
	t.Helper()
	return awaitListed(t, origin, inBandKeys[who].token, want)
}

// A blocking Ask with ClientMayDecide asks the caller's own client with a
// native elicitation: an admin's or a member's answer is the decision
// (recorded by the session grain: a surface's later accept is 409). A
// viewer's client is never asked — its "accept" would decide nothing —
// and the question waits for an approver on a surface.
func TestClientMayDecideAskInBand(t *testing.T) {
	origin := runKeyedNode(t, mcpgrain.Server{Name: "inband", Register: inBandTools})
	for _, who := range []string{"ada", "meg"} {
		asked := make(chan string, 4)
		cs := connectAs(t, origin, who, "accept", asked)
		if got := callText(t, cs, "ship", nil); got != "true "+who {
			t.Fatalf("%s's ship: %q, want decided in band by %s", who, got, who)
		}
		if q := drain(asked); len(q) != 1 || q[0] != "Ship it?" {
			t.Fatalf("%s's client was asked %q, want the question once", who, q)
		}
	}

	asked := make(chan string, 4)
	vic := connectAs(t, origin, "vic", "accept", asked)
	got := make(chan string, 1)
	go func() { got <- callText(t, vic, "ship", nil) }()
	id := pendingAs(t, origin, "ada", "Ship it?")
	if code := decideOverHTTP(t, origin, "vic", id, "accept"); code != http.StatusForbidden {
		t.Fatalf("the viewer's HTTP accept: %d, want 403", code)
	}
	select {
	case g := <-got:
		t.Fatalf("the viewer's ship ended without an approver: %q", g)
	default:
	}
	if code := decideOverHTTP(t, origin, "meg", id, "accept"); code != http.StatusOK {
		t.Fatalf("the member's HTTP accept: %d, want 200", code)
	}
	if g := <-got; g != "true meg" {
		t.Fatalf("the viewer's ship: %q, want accepted by meg", g)
	}
	// Its client would have been asked as the question was published,
	// long before the member decided: it never was.
	if q := drain(asked); len(q) != 0 {
		t.Fatalf("the viewer's client was asked %q: a viewer may not decide", q)
	}
}

// DecideAsk decides a pending question asked with ClientMayDecide from a
// later call of any session of the same user, through the owning
// session; a second decision (in band or a surface's) is refused. A
// viewer may not decide its own question, another user of the
// organization finds it foreign, another organization does not find it,
// and a question asked without ClientMayDecide is decided on the surfaces
// only.
func TestDecideAskFromAnotherSession(t *testing.T) {
	origin := runKeyedNode(t, mcpgrain.Server{Name: "inband", Register: inBandTools})
	meg, megToo := connectAs(t, origin, "meg", "cancel", nil), connectAs(t, origin, "meg", "cancel", nil)
	id := callText(t, meg, "ship_later", map[string]any{"inBand": true})
	if got := callText(t, megToo, "decide", map[string]any{"id": id, "accept": true}); got != "decided true meg" {
		t.Fatalf("meg's DecideAsk from another session: %q", got)
	}
	if got := callText(t, meg, "status", map[string]any{"id": id}); got != "decided true meg" {
		t.Fatalf("status in the asking session: %q", got)
	}
	if got := callText(t, meg, "decide", map[string]any{"id": id, "accept": false}); !strings.Contains(got, mcpgrain.ErrAlreadyDecided.Error()) {
		t.Fatalf("a second DecideAsk: %q, want ErrAlreadyDecided", got)
	}
	if code := decideOverHTTP(t, origin, "ada", id, "decline"); code != http.StatusConflict {
		t.Fatalf("a surface's decision after the client's: %d, want 409", code)
	}

	closed := callText(t, meg, "ship_later", map[string]any{"inBand": false})
	if got := callText(t, megToo, "decide", map[string]any{"id": closed, "accept": true}); !strings.Contains(got, mcpgrain.ErrClientMayNotDecide.Error()) {
		t.Fatalf("DecideAsk of a question without ClientMayDecide: %q", got)
	}

	vic := connectAs(t, origin, "vic", "accept", nil)
	vics := callText(t, vic, "ship_later", map[string]any{"inBand": true})
	hostile := []struct{ who, want string }{
		{"vic", mcpgrain.ErrMayNotDecide.Error()}, // a viewer, its own question
		{"ada", mcpgrain.ErrForeignAsk.Error()},   // another user of acme, an admin
		{"eve", mcpgrain.ErrUnknownAsk.Error()},   // globex's admin
	}
	for _, h := range hostile {
		cs := vic
		if h.who != "vic" {
			cs = connectAs(t, origin, h.who, "accept", nil)
		}
		if got := callText(t, cs, "decide", map[string]any{"id": vics, "accept": true}); !strings.Contains(got, h.want) {
			t.Fatalf("%s's DecideAsk of vic's question: %q, want %q", h.who, got, h.want)
		}
	}
	if got := callText(t, vic, "status", map[string]any{"id": vics}); got != "pending false " {
		t.Fatalf("vic's question after the refused decisions: %q, want pending", got)
	}
	if got := callText(t, vic, "status", map[string]any{"id": closed}); !strings.Contains(got, mcpgrain.ErrForeignAsk.Error()) {
		t.Fatalf("vic reads meg's question: %q, want ErrForeignAsk", got)
	}
	if code := decideOverHTTP(t, origin, "ada", vics, "accept"); code != http.StatusOK {
		t.Fatalf("an admin's HTTP accept of vic's question: %d", code)
	}
	if got := callText(t, vic, "status", map[string]any{"id": vics}); got != "decided true ada" {
		t.Fatalf("vic's question: %q, want accepted by ada", got)
	}
}

// DecideAsk outside a tool call of a session says so.
func TestDecideAskNeedsAToolCallOfASession(t *testing.T) {
	if _, err := mcpgrain.DecideAsk(context.Background(), &mcp.CallToolRequest{}, "exec_x", mcpgrain.Answer{Accept: true}); !errors.Is(err, mcpgrain.ErrNoSessionCall) {
		t.Fatalf("DecideAsk: %v", err)
	}
	if _, err := mcpgrain.DecideAsk(context.Background(), nil, "exec_x", mcpgrain.Answer{}); err == nil {
		t.Fatal("DecideAsk without a request: no error")
	}
}

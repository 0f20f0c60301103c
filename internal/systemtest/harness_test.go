package systemtest

// The names this package's tests drive nodes with, bound to the shared
// harness in internal/testcluster (so the test files keep reading as they
// did when they shared one package).

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

const (
	aliceToken = testcluster.AliceToken
	bobToken   = testcluster.BobToken
	carolToken = testcluster.CarolToken
	veraToken  = testcluster.VeraToken
	createCode = testcluster.CreateCode
)

var testStateKey = testcluster.LocalStateKey

// startNode runs a real single-node mcpgrain and returns its HTTP address.
func startNode(t testing.TB, tweak func(*app.Config)) string {
	t.Helper()
	return startNodeInfo(t, tweak).HTTPAddr
}

// startNodeInfo is startNode, returning everything the node reports.
func startNodeInfo(t testing.TB, tweak func(*app.Config)) app.Info {
	t.Helper()
	info, _ := testcluster.StartLocal(t, tweak)
	return info
}

// startNodeStoppable is startNodeInfo with a graceful stop function.
func startNodeStoppable(t testing.TB, tweak func(*app.Config)) (app.Info, func() error) {
	t.Helper()
	return testcluster.StartLocal(t, tweak)
}

// startCodeNode runs a node with code mode and the demo API.
func startCodeNode(t testing.TB, tweak func(*app.Config)) app.Info {
	t.Helper()
	return testcluster.StartCodeNode(t, tweak)
}

// codeNode is the configuration tweak of startCodeNode.
func codeNode(t testing.TB, tweak func(*app.Config)) func(*app.Config) {
	return testcluster.CodeNode(t, tweak)
}

func mustKeys(t testing.TB, token, user, org, role string) *auth.Keys {
	t.Helper()
	return testcluster.MustKeys(t, token, user, org, role)
}

func connect(t testing.TB, addr, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return testcluster.Connect(t, addr, token, version, opts)
}

// connectMode connects with ?elicitation_mode=mode ("" for the default).
func connectMode(t testing.TB, addr, token, mode string) *mcp.ClientSession {
	t.Helper()
	return testcluster.ConnectMode(t, addr, token, mode)
}

func mrtrClient(t *testing.T, addr, token string) *mcp.ClientSession {
	t.Helper()
	return testcluster.MRTRClient(t, addr, token)
}

func confirmRetry(state string) *mcp.CallToolParams { return testcluster.ConfirmRetry(state) }

// connectOwnedBy connects through node via until the minted session is
// owned by node owner.
func connectOwnedBy(t testing.TB, c *testcluster.Cluster, via, owner int, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return testcluster.ConnectOwnedBy(t, c, via, owner, testcluster.Token, opts)
}

// connectOwnedByAs is connectOwnedBy with the given bearer token.
func connectOwnedByAs(t testing.TB, c *testcluster.Cluster, via, owner int, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return testcluster.ConnectOwnedBy(t, c, via, owner, token, opts)
}

func callTool(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return testcluster.CallTool(t, cs, tool, args)
}

func callToolWithin(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, within time.Duration) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return testcluster.CallToolWithin(t, cs, tool, args, within)
}

func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	return testcluster.Structured(t, res)
}

func echo(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	testcluster.Echo(t, cs, text)
}

// pause runs createCode and returns the paused execution's id.
func pause(t testing.TB, cs *mcp.ClientSession, wantStatus string) string {
	t.Helper()
	return testcluster.Pause(t, cs, wantStatus)
}

type apiResponse struct {
	status int
	body   map[string]any
}

func api(t testing.TB, method, url, token, body string) apiResponse {
	t.Helper()
	r := testcluster.API(t, method, url, token, body)
	return apiResponse{r.Status, r.Body}
}

func todos(t testing.TB, addr, token string) []map[string]any {
	t.Helper()
	return testcluster.Todos(t, addr, token)
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func raw(t *testing.T, method, addr string, headers map[string]string, body string) rawResponse {
	t.Helper()
	r := testcluster.Raw(t, method, addr, headers, body)
	return rawResponse{r.Status, r.Header, r.Body}
}

func rpcCode(t *testing.T, body []byte) int {
	t.Helper()
	return testcluster.RPCCode(t, body)
}

// scrape is one parsed GET /metrics of a running node.
type scrape testcluster.Scrape

func scrapeMetrics(t testing.TB, addr string) scrape {
	t.Helper()
	return scrape(testcluster.ScrapeMetrics(t, addr))
}

func (s scrape) value(name string, want map[string]string) float64 {
	return testcluster.Scrape(s).Value(name, want)
}

// metricsProbe reads one metric of a node and waits for it to move.
type metricsProbe struct {
	t    *testing.T
	addr string
}

func (p metricsProbe) probe() testcluster.MetricsProbe {
	return testcluster.MetricsProbe{T: p.t, Addr: p.addr}
}

func (p metricsProbe) get(name string, labels map[string]string) float64 {
	return p.probe().Get(name, labels)
}

func (p metricsProbe) handshakesEnded(labels map[string]string, n int) {
	p.t.Helper()
	p.probe().HandshakesEnded(labels, n)
}

func (p metricsProbe) waitFor(what, name string, labels map[string]string, ok func(float64) bool) float64 {
	p.t.Helper()
	return p.probe().WaitFor(what, name, labels, ok)
}

func exactly(n float64) func(float64) bool { return testcluster.Exactly(n) }

func approvalClient(t testing.TB, addr string) pb.ApprovalServiceClient {
	t.Helper()
	return testcluster.ApprovalClient(t, addr)
}

func withToken(t testing.TB, token string) context.Context { return testcluster.WithToken(t, token) }

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	return testcluster.TokenFile(t, token)
}

// mcpgrainCLI runs the CLI binary.
func mcpgrainCLI(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	return testcluster.CLI(t, bin, args...)
}

func decision(id string) string { return testcluster.InboxDecision(id) }

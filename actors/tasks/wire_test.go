package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
)

func TestDeclaredReadsThePerRequestClientCapabilities(t *testing.T) {
	for name, c := range map[string]struct {
		meta map[string]any
		want bool
	}{
		"declared":      {map[string]any{metaCapabilities: map[string]any{"extensions": map[string]any{Extension: map[string]any{}}}}, true},
		"other ext":     {map[string]any{metaCapabilities: map[string]any{"extensions": map[string]any{"x/y": map[string]any{}}}}, false},
		"no extensions": {map[string]any{metaCapabilities: map[string]any{}}, false},
		"v1 slot":       {map[string]any{metaCapabilities: map[string]any{"tasks": map[string]any{}}}, false},
		"no meta":       {nil, false},
	} {
		if got := declared(c.meta); got != c.want {
			t.Errorf("%s: declared = %v, want %v", name, got, c.want)
		}
	}
}

func TestWireShapesOfCreateAndDetailedTask(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_123)
	task := taskstore.Task{ID: "task-1", Status: string(Completed), Result: `{"content":[{"type":"text","text":"ok"}]}`,
		TTL: time.Hour, PollInterval: 500 * time.Millisecond, Created: at, Updated: at, RequestState: "secret"}
	b, _ := json.Marshal(created(task))
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	if c["resultType"] != "task" || c["taskId"] != "task-1" || c["ttlMs"] != float64(3600000) || c["pollIntervalMs"] != float64(500) ||
		c["createdAt"] != "2030-03-17T17:46:40.123Z" {
		t.Errorf("CreateTaskResult = %s", b)
	}
	for _, k := range []string{"result", "error", "inputRequests", "requestState", "ttl", "pollInterval", "task"} {
		if _, ok := c[k]; ok {
			t.Errorf("CreateTaskResult carries %q: %s", k, b)
		}
	}
	b, _ = json.Marshal(detailed(task))
	var d map[string]any
	_ = json.Unmarshal(b, &d)
	if d["resultType"] != "complete" || d["status"] != "completed" || d["result"] == nil || d["error"] != nil || strings.Contains(string(b), "secret") {
		t.Errorf("DetailedTask of a completed task = %s", b)
	}
	task.Status, task.Error = string(Failed), `{"code":-32603,"message":"boom"}`
	b, _ = json.Marshal(detailed(task))
	if !strings.Contains(string(b), `"error":{"code":-32603`) || strings.Contains(string(b), `"result"`) {
		t.Errorf("DetailedTask of a failed task = %s", b)
	}
}

func TestParseOutcomeTellsResultInputAndError(t *testing.T) {
	if o := parseOutcome(200, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}`)); o.err != nil || o.result == nil {
		t.Errorf("result: %+v", o)
	}
	o := parseOutcome(200, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{\"k\":{\"method\":\"elicitation/create\"}},\"requestState\":\"s1\"}}\n\n"))
	if o.err != nil || o.result != nil || !strings.Contains(string(o.inputRequests), "elicitation/create") || o.requestState != "s1" {
		t.Errorf("input (SSE): %+v", o)
	}
	if o := parseOutcome(200, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`)); o.err == nil || o.err.Code != -32603 {
		t.Errorf("error: %+v", o)
	}
	if o := parseOutcome(500, []byte(`oops`)); o.err == nil || o.err.Code != jsonrpc.CodeInternalError {
		t.Errorf("garbage: %+v", o)
	}
}

func TestCallBodyCarriesTheRoundAndTheProtocolMeta(t *testing.T) {
	params := json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"a"},"requestState":"old","inputResponses":{"x":1},"task":{"ttl":1}}`)
	b, name, err := callBody(params, json.RawMessage(`{"k":{"action":"accept"}}`), "s2")
	if err != nil || name != "confirm_delete" {
		t.Fatalf("callBody: %q %v", name, err)
	}
	var req struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(b, &req)
	if req.Method != "tools/call" || string(req.Params["requestState"]) != `"s2"` || string(req.Params["inputResponses"]) != `{"k":{"action":"accept"}}` ||
		!strings.Contains(string(req.Params["_meta"]), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
		t.Errorf("body = %s", b)
	}
}

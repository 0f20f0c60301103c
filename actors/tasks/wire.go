package tasks

import (
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
)

// Extension is the extension's identifier in capabilities.extensions.
const Extension = "io.modelcontextprotocol/tasks"

// The JSON-RPC error codes of the extension's surface are go-sdk's:
// mcp.CodeMissingRequiredClientCapabilities (-32021: a tasks/* request, or
// a tools/call of a tool that requires tasks, from a request that did not
// declare the extension), mcp.CodeHeaderMismatch (-32020: the Mcp-Name
// header does not name the body's taskId) and the standard jsonrpc codes
// (-32602 for an unknown or foreign task id).

// The JSON-RPC methods of the extension. tasks/result and tasks/list of
// the extension's first version are removed: they stay unknown (-32601).
const (
	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"
)

// IsMethod reports whether method is one of the extension's methods, which
// the gateway routes to the task grain named by the request's taskId.
func IsMethod(method string) bool {
	return method == MethodGet || method == MethodUpdate || method == MethodCancel
}

// metaCapabilities is the per-request _meta key of the client's
// capabilities (SEP-2575).
const metaCapabilities = "io.modelcontextprotocol/clientCapabilities"

// declared reports whether a request's _meta declares the extension in its
// client capabilities.
func declared(meta map[string]any) bool {
	caps, _ := meta[metaCapabilities].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[Extension]
	return ok
}

// Mode is how a tool supports tasks.
type Mode int

// The task support modes of a tool.
const (
	// None: the tool always answers in its request (the default).
	None Mode = iota
	// Optional: the tool runs as a task when the request declares the
	// extension, else in its request.
	Optional
	// Required: the tool runs only as a task; a request that does not
	// declare the extension gets -32021.
	Required
)

// Support is a tool's task support.
type Support struct {
	// Mode says whether the tool runs as a task.
	Mode Mode
	// AfterInput keeps the tool's multi-round-trip rounds synchronous
	// until a round brings inputResponses: that round becomes the task
	// (the tool gathers input first, then works).
	AfterInput bool
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *rpcError) Error() string { return e.Message }

// missingCapability is the -32021 error naming the extension.
func missingCapability(what string) *rpcError {
	return &rpcError{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: what + " requires the client capability extensions[\"" + Extension + "\"]",
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + Extension + `":{}}}}`),
	}
}

// wireTask is a task on the wire: a CreateTaskResult (resultType "task",
// no result/error/inputRequests) or, for tasks/get, a DetailedTask
// (resultType "complete", with what its status carries).
type wireTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         Status          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
	InputRequests  json.RawMessage `json:"inputRequests,omitempty"`
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// created is the CreateTaskResult of t.
func created(t taskstore.Task) wireTask {
	return wireTask{
		ResultType: "task", TaskID: t.ID, Status: Status(t.Status), StatusMessage: t.StatusMessage,
		CreatedAt: isoTime(t.Created), LastUpdatedAt: isoTime(t.Updated),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(),
	}
}

// detailed is the tasks/get answer for t: the result of a completed task,
// the error of a failed one, the pending input requests of one waiting.
func detailed(t taskstore.Task) wireTask {
	w := created(t)
	w.ResultType = "complete"
	switch Status(t.Status) {
	case Completed:
		w.Result = json.RawMessage(t.Result)
	case Failed:
		w.Error = json.RawMessage(t.Error)
	case InputRequired:
		w.InputRequests = json.RawMessage(t.InputRequests)
	}
	return w
}

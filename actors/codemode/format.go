package codemode

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
)

// MaxPreviewChars bounds the text rendering of a result (executor's
// MAX_PREVIEW_CHARS).
const MaxPreviewChars = 30000

// formatTTL renders an approval window like executor's formatTtlDuration:
// "N minutes" when it divides evenly, otherwise "N seconds".
func formatTTL(d time.Duration) string {
	ms := d.Milliseconds()
	if ms%60000 == 0 {
		n := ms / 60000
		if n == 1 {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", n)
	}
	n := ms / 1000
	if n == 1 {
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}

func preview(v any) string {
	if s, ok := v.(string); ok {
		return truncate(s)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(string(b))
}

func truncate(s string) string {
	if len(s) <= MaxPreviewChars {
		return s
	}
	return s[:MaxPreviewChars] + fmt.Sprintf("\n… (truncated, %d more characters)", len(s)-MaxPreviewChars)
}

func logsText(logs []string) string {
	if len(logs) == 0 {
		return ""
	}
	return "\nLogs:\n" + strings.Join(logs, "\n")
}

// Completed renders a completed execution: emitted output first, then the
// result with its logs.
func Completed(out engine.Outcome) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	for _, e := range out.Result.Emitted {
		res.Content = append(res.Content, &mcp.TextContent{Text: preview(e)})
	}
	text := "(no return value)"
	if out.Result.Value != nil {
		text = preview(out.Result.Value)
	}
	res.Content = append(res.Content, &mcp.TextContent{Text: text + logsText(out.Result.Logs)})
	structured := map[string]any{"status": "completed", "result": out.Result.Value, "logs": nonNil(out.Result.Logs)}
	if len(out.Result.Emitted) > 0 {
		structured["emitted"] = out.Result.Emitted
	}
	res.StructuredContent = structured
	return res
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Failed renders a code failure (isError, message shown). Its structured
// content names the kind of failure (errorKind: syntax, runtime, timeout,
// limit, busy), for limit and timeout which limit stopped it (limit: heap,
// output, tool_calls, code_size, wall_time), and whether retrying the same
// call may succeed (retryable: a running-executions cap was full and
// nothing ran), so a client need not read the message to decide.
func Failed(out engine.Outcome) *mcp.CallToolResult {
	msg := out.Error
	sc := map[string]any{"status": "error", "error": msg, "logs": nonNil(out.Result.Logs)}
	if out.ErrorKind != "" {
		sc["errorKind"] = out.ErrorKind
		sc["retryable"] = out.ErrorKind == sandbox.KindBusy
	}
	if out.ErrorLimit != "" {
		sc["limit"] = out.ErrorLimit
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: "Error: " + msg + logsText(out.Result.Logs)}},
		StructuredContent: sc,
	}
}

// Internal renders an infrastructure failure: an opaque correlation id
// (the cause goes to the log under the same id).
func Internal() (*mcp.CallToolResult, string) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	msg := fmt.Sprintf("Internal tool error [%s]", id)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: "Error: " + msg}},
		StructuredContent: map[string]any{"status": "error", "error": msg},
	}, id
}

// emptySchema is the schema of a confirmation gate.
var emptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

// PausedModel renders the model-mode payload (waiting_for_interaction).
func PausedModel(p *engine.Pause, window time.Duration) *mcp.CallToolResult {
	ttl := formatTTL(window)
	expires := p.Deadline.UTC().Format(time.RFC3339)
	instructions := "Ask the user whether to approve this action. If they approve, call the resume tool with this executionId and action \"accept\"; " +
		"if they decline, call it with action \"decline\". Resume before " + expires + "; this approval window lasts " + ttl + "."
	var b strings.Builder
	fmt.Fprintf(&b, "Execution paused: %s", p.Message)
	b.WriteString("\nThis is a model-side confirmation gate; no browser form is waiting. Ask the user, then call the resume tool.")
	fmt.Fprintf(&b, "\nexecutionId: %s", p.ID)
	fmt.Fprintf(&b, "\nresumeDeadline: %s (%s approval window)", expires, ttl)
	fmt.Fprintf(&b, "\ninstructions: %s", instructions)
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: map[string]any{
			"status":      "waiting_for_interaction",
			"executionId": p.ID,
			"expiresAt":   expires,
			"ttlMs":       window.Milliseconds(),
			"interaction": map[string]any{
				"kind": "form", "message": p.Message, "instructions": instructions, "address": p.Address,
				"requestedSchema": emptySchema,
			},
		},
	}
}

// resumePrompt is executor's next-step text for browser mode.
const resumePrompt = "Return text to the user telling them to approve the action at this approvalUrl. " +
	"Only after you have prompted the user, call the `resume` tool with this executionId; `resume` will wait for the user's browser decision."

// PausedBrowser renders the browser-mode payload (user_approval_required).
func PausedBrowser(p *engine.Pause, approvalURL string) *mcp.CallToolResult {
	return UserApprovalRequired(p.ID, approvalURL)
}

// UserApprovalRequired renders the browser-mode payload for execution id.
func UserApprovalRequired(id, approvalURL string) *mcp.CallToolResult {
	text := "User approval required.\n\nTell the user to open this URL while signed in and approve or decline the paused interaction:\n" +
		approvalURL + "\n\nRequired next steps for this agent:\n" + resumePrompt
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{
			"status": "user_approval_required", "executionId": id, "approvalUrl": approvalURL, "resumePrompt": resumePrompt,
		},
	}
}

// InsufficientRole renders a decision the caller's role may not make
// (policy.Approvers): nothing was decided, the execution still waits, and
// an approver can decide it at approvalURL.
func InsufficientRole(id, role, approvalURL string) *mcp.CallToolResult {
	if role == "" {
		role = "none"
	}
	text := fmt.Sprintf("Your role (%s) may not decide paused executions; nothing was decided and execution %s still waits. "+
		"Ask an approver of your organization to open %s and decide it, then call resume with just the executionId to get the result.", role, id, approvalURL)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"status": "insufficient_role", "executionId": id, "approvalUrl": approvalURL, "role": role}}
}

// Miss is a resume that found no live pause.
type Miss string

// Resume-miss statuses.
const (
	NotFound       Miss = "execution_not_found"
	Expired        Miss = "execution_expired"
	Forbidden      Miss = "execution_forbidden"
	AlreadySettled Miss = "execution_already_settled"
)

const recoverHint = "To recover, run the execute tool again with the original code; if it pauses, a fresh executionId will be issued."

// ResumeMiss renders a resume that found nothing to resume. Only the
// misses where nothing ran past the pause (unknown, expired: declined at
// its deadline) advise running the code again (recovery re_execute); a
// settled execution never does, since its calls already took effect.
func ResumeMiss(m Miss, id string, window time.Duration) *mcp.CallToolResult {
	structured := map[string]any{"status": string(m), "executionId": id}
	var text string
	switch m {
	case Expired:
		text = fmt.Sprintf("Execution %s expired. Approval windows last %s; the owning session no longer has a live pause for it. %s", id, formatTTL(window), recoverHint)
		structured["ttlMs"] = window.Milliseconds()
		structured["recovery"] = "re_execute"
	case Forbidden:
		text = fmt.Sprintf("Execution %s belongs to another account. Resume must be called by the same account and organization that owns the paused session.", id)
	case AlreadySettled:
		// Never advice to run the code again: what it did (an approved
		// write included) already happened.
		text = fmt.Sprintf("Execution %s was already resumed and has settled; its result cannot be produced again. "+
			"Do not run the code again to recover it: the calls it made, accepted writes included, already took effect.", id)
	default:
		text = fmt.Sprintf("No paused execution %s was found. %s", id, recoverHint)
		structured["recovery"] = "re_execute"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
}

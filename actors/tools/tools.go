package tools

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrUnknownTool is wrapped by the error a call returns when its path names
// no tool: a malformed path, an unknown source or an unknown tool name. Test
// with errors.Is.
var ErrUnknownTool = errors.New("unknown tool")

// Tool describes one callable tool. Sources return it by value; the
// InputSchema bytes are shared and must not be modified.
type Tool struct {
	// Path is the address code uses, "<source>.<name>", e.g. "demo.createTodo".
	Path string
	// Source is the name of the source that owns the tool, e.g. "demo".
	Source string
	// Name is the tool's name within its source, e.g. "createTodo".
	Name string
	// Description is the human-readable description (for OpenAPI, the
	// operation's summary followed by its description).
	Description string
	// InputSchema is the JSON Schema of the args object, or nil when the
	// source has none.
	InputSchema json.RawMessage
	// RequiresApproval is the source's default: true for OpenAPI methods
	// other than GET, HEAD and OPTIONS and for MCP tools not marked
	// readOnlyHint true (or marked destructiveHint true). Policies may
	// override it.
	RequiresApproval bool
	// ApprovalText is the short text shown to the approver, e.g.
	// "POST /todos" (OpenAPI) or "Call upstream tool delete_file" (MCP).
	ApprovalText string
	// Idempotent reports that the tool is safe to call again after a crash:
	// OpenAPI GET, HEAD and OPTIONS, MCP readOnlyHint or idempotentHint
	// true. A durable execution retries such a call once if it was in
	// flight when its node died (others fail with execution_interrupted).
	Idempotent bool
}

// Source is a named set of tools that can be looked up by name, called and
// searched. Implementations must be safe for concurrent use.
type Source interface {
	// Name returns the source's name, the first segment of its tools' paths.
	// It must match ^[a-zA-Z][a-zA-Z0-9_]*$ and must not change.
	Name() string
	// Lookup finds one tool by name. It is a point lookup: it must not list
	// or scan the source's tools.
	Lookup(ctx context.Context, name string) (Tool, bool)
	// Call calls the named tool with args and returns a JSON-able result.
	// An unknown name returns an error wrapping ErrUnknownTool; other errors
	// must be safe to show to the calling code.
	Call(ctx context.Context, name string, args map[string]any) (any, error)
	// Search returns at most limit tools ranked by a token score of query
	// over their name, summary, path and description (see SearchText).
	Search(ctx context.Context, query string, limit int) []Tool
}

// Availability is implemented by sources that can be without their tools
// for a while, such as an upstream MCP server that has not connected yet.
type Availability interface {
	// Unavailable returns why the source cannot offer its tools now (an
	// error safe to show to the calling code), or nil when it can.
	Unavailable() error
}

// ChangeNotifier is implemented by sources whose tools change at run time,
// such as an upstream MCP server that announces a new tool list or
// connects late.
type ChangeNotifier interface {
	// OnChange adds f to the functions called, each in a goroutine of its
	// own, after the source's tools changed.
	OnChange(f func())
}

// Hit is one search result with its score, as returned by a ScoredSearcher.
type Hit struct {
	// Tool is the matching tool.
	Tool Tool
	// Score is its SearchText score; higher ranks first.
	Score int
}

// ScoredSearcher is implemented by sources whose search results carry
// scores. The Registry merges the results of several sources by these
// scores; for a source without it, the Registry scores the returned tools
// itself from their name, path and description.
type ScoredSearcher interface {
	// SearchScored is Search with the score of each result.
	SearchScored(ctx context.Context, query string, limit int) []Hit
}

var nameRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]*$`)

// ValidSourceName reports whether name is a valid source name:
// ^[a-zA-Z][a-zA-Z0-9_]*$, so that tools.<name> is a plain identifier in code.
func ValidSourceName(name string) bool { return nameRE.MatchString(name) }

// TruncateText returns s cut to at most max bytes on a UTF-8 boundary, with
// "… (truncated, N bytes)" appended when it was cut. Sources use it for
// response bodies and upstream error text in the errors they return.
func TruncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	var b strings.Builder
	b.Grow(cut + 40)
	b.WriteString(s[:cut])
	b.WriteString("… (truncated, ")
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteString(" bytes)")
	return b.String()
}

package mcpupstream

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestApprovalDefaults(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name                 string
		a                    *mcp.ToolAnnotations
		requires, idempotent bool
	}{
		{"no annotations", nil, true, false},
		{"empty annotations", &mcp.ToolAnnotations{}, true, false},
		{"title only", &mcp.ToolAnnotations{Title: "Screenshot"}, true, false},
		{"readOnlyHint", &mcp.ToolAnnotations{ReadOnlyHint: true}, false, true},
		{"readOnlyHint, destructiveHint false", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, false, true},
		{"readOnlyHint beside destructiveHint true", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true, true},
		{"destructiveHint false (additive writes)", &mcp.ToolAnnotations{DestructiveHint: &no}, true, false},
		{"destructiveHint true", &mcp.ToolAnnotations{DestructiveHint: &yes}, true, false},
		{"idempotentHint", &mcp.ToolAnnotations{IdempotentHint: true}, true, true},
		{"idempotentHint, destructiveHint false", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}, true, true},
		{"openWorldHint false", &mcp.ToolAnnotations{OpenWorldHint: &no}, true, false},
	}
	for _, tc := range cases {
		requires, idempotent := approvalDefaults(tc.a)
		if requires != tc.requires || idempotent != tc.idempotent {
			t.Errorf("%s: requires %v idempotent %v, want %v %v", tc.name, requires, idempotent, tc.requires, tc.idempotent)
		}
	}
}

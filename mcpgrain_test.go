package mcpgrain

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func register(s *mcp.Server) {}

// Run refuses an invalid Server and an unknown or mcpgrain-only command
// with ErrUsage, and runs the version command.
func TestRunChecksServerAndCommand(t *testing.T) {
	for name, tc := range map[string]struct {
		s    Server
		args []string
	}{
		"no name":        {Server{Register: register}, []string{"version"}},
		"bad name":       {Server{Name: "Hello World", Register: register}, []string{"version"}},
		"no register":    {Server{Name: "hello"}, []string{"version"}},
		"builtin name":   {Server{Name: "code", Register: register}, []string{"version"}},
		"unknown with":   {Server{Name: "hello", Register: register, With: []string{"nope"}}, []string{"version"}},
		"no command":     {Server{Name: "hello", Register: register}, nil},
		"mcpgrain's try": {Server{Name: "hello", Register: register}, []string{"try"}},
		"unknown tools":  {Server{Name: "hello", Register: register}, []string{"dev", "--tools", "nope"}},
	} {
		err := Run(t.Context(), tc.s, tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, ErrUsage) {
			t.Errorf("%s: Run = %v, want ErrUsage", name, err)
		}
	}
	var out bytes.Buffer
	if err := Run(t.Context(), Server{Name: "hello", Version: "1.2.3", Register: register}, []string{"version"}, &out, &out); err != nil || !strings.HasSuffix(out.String(), " 1.2.3\n") {
		t.Fatalf("version: %v, printed %q, want the server's version", err, out.String())
	}
}

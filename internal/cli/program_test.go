package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// A program with packs of its own (an SDK user's server) names itself in
// its usage, knows its packs besides the built-ins, selects its own by
// default, and offers only the node commands (try and bench are the
// mcpgrain command's).
func TestProgramWithOwnPacks(t *testing.T) {
	p := Program{Name: "hello", Version: "1.0.0", Packs: []toolpacks.Pack{toolpacks.NewPack("hello", func(*mcp.Server) {})}, Tools: "hello"}
	var out, errOut bytes.Buffer
	if err := p.Run(t.Context(), []string{"dev", "-h"}, &out, &errOut); err != nil {
		t.Fatalf("dev -h: %v", err)
	}
	for _, want := range []string{"Usage: hello dev [flags]", "known: code, demo, conformance, hello", `(default "hello")`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("dev -h lacks %q:\n%s", want, errOut.String())
		}
	}
	for args, want := range map[string]string{
		"approve -h":      "Usage: hello approve <command>",
		"approve list -h": "Usage: hello approve list",
	} {
		errOut.Reset()
		_ = p.Run(t.Context(), strings.Fields(args), &out, &errOut)
		if !strings.Contains(errOut.String(), want) || strings.Contains(errOut.String(), "mcpgrain approve") {
			t.Errorf("%s: want %q and no \"mcpgrain approve\" in:\n%s", args, want, errOut.String())
		}
	}
	for _, cmd := range []string{"try", "bench"} {
		if err := p.Run(t.Context(), []string{cmd}, &out, &errOut); !errors.Is(err, ErrUsage) {
			t.Errorf("%s: %v, want ErrUsage (not a command of an SDK program)", cmd, err)
		}
	}
	if err := p.Run(t.Context(), []string{"dev", "--tools", "hello,nope"}, &out, &errOut); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("--tools hello,nope: %v, want a usage error naming nope", err)
	}
	out.Reset()
	if code := p.Main([]string{"version"}, &out, &errOut); code != 0 || out.String() != "hello 1.0.0\n" {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
}

package mcpruntime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A runtime's logger adds the session's id to every record, first, also
// through With and WithGroup, and asks the node's handler what is enabled.
func TestSessionLogAddsTheSessionID(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	r := &Runtime{id: "S1", b: &Builder{cfg: Config{Logger: base}}}
	r.log = *slog.New((*sessionLog)(r))
	r.log.Debug("hidden")
	r.log.Info("built", "tools", 3)
	r.log.With("k", "v").Warn("with")
	r.log.WithGroup("g").Info("grouped", "x", 1)
	want := []string{
		`level=INFO msg=built session=S1 tools=3`,
		`level=WARN msg=with session=S1 k=v`,
		`level=INFO msg=grouped session=S1 g.x=1`,
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged:\n%s\nwant:\n%s", buf.String(), strings.Join(want, "\n"))
	}
}

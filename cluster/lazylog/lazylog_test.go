package lazylog_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/lazylog"
)

// A lazy logger writes what slog's own With writes, through every way of
// adding attributes and groups.
func TestWithWritesWhatSlogWithWrites(t *testing.T) {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	for _, json := range []bool{false, true} {
		var want, got bytes.Buffer
		mk := func(b *bytes.Buffer) *slog.Logger {
			o := &slog.HandlerOptions{ReplaceAttr: noTime, Level: slog.LevelInfo}
			if json {
				return slog.New(slog.NewJSONHandler(b, o))
			}
			return slog.New(slog.NewTextHandler(b, o))
		}
		eager := mk(&want).With("kind", "session", "identity", "abc", slog.Int("epoch", 3))
		lazy := lazylog.With(mk(&got), "kind", "session", "identity", "abc", slog.Int("epoch", 3))
		for _, l := range []*slog.Logger{eager, lazy} {
			l.Info("plain", "n", 1)
			l.Debug("below the level")
			l.With("more", true).Warn("with more")
			l.WithGroup("g").Error("grouped", "x", "y")
		}
		if got.String() != want.String() {
			t.Fatalf("json=%v:\nlazy:  %s\nslog:  %s", json, got.String(), want.String())
		}
	}
}

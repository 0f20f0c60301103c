package lazylog_test

import (
	"log/slog"
	"os"

	"github.com/mcpgrain/mcpgrain/cluster/lazylog"
)

func ExampleWith() {
	base := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	// One logger per session: nothing is formatted until it logs.
	l := lazylog.With(base, "session", "S1")
	l.Info("runtime built", "tools", 3)
	// Output: level=INFO msg="runtime built" session=S1 tools=3
}

package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// flagGroup is one heading of a command's help and the flags under it,
// in the order they are printed.
type flagGroup struct {
	title string
	names []string
}

// flagGroups orders every command's help: basics first, then approvals,
// limits, sessions, cluster, OAuth, TLS and observability. A flag named
// in no group is printed under "Other" (TestEveryFlagHasAGroup fails for
// it): add a new flag's name to the group it belongs to.
var flagGroups = []flagGroup{
	{"Basics", []string{"http", "grpc", "url", "data", "store", "store-file", "tools", "demo-api",
		"token", "token-file", "no-auth", "keys-file", "public-url", "code"}},
	{"Tool sources and policy", []string{"openapi", "upstream", "expose-upstream", "sources", "policy", "execute-api-bytes"}},
	{"Approvals", []string{"approval-window", "approvers", "q", "json", "reason", "all", "wait", "timeout"}},
	{"Limits", []string{"exec-timeout", "exec-max-tool-calls", "exec-max-output", "exec-max-running",
		"exec-max-running-per-user", "exec-max-running-per-org", "exec-slot-wait",
		"rate-limit", "rate-burst", "auth-failure-rate", "auth-failure-burst", "body-timeout", "max-in-flight", "queue-wait", "stream-keepalive",
		"event-max-bytes", "event-session-bytes", "event-principal-bytes", "event-store-bytes", "trusted-origins"}},
	{"Sessions", []string{"session-timeout", "paused-lease", "max-paused-idle", "running-lease", "max-running-idle",
		"session-ttl", "task-ttl", "handle-ttl", "max-handles-per-principal", "max-pending-asks-per-principal", "resident-memory", "resident-soft-cap", "session-placement", "state-key", "state-key-file"}},
	{"Cluster", []string{"cluster", "consul", "consul-ttl", "join-timeout", "shutdown-timeout", "bind", "advertise",
		"node-id", "gateway-only", "reminder-poll"}},
	{"OAuth", []string{"oauth-issuer", "oauth-resource", "oauth-default-org", "oauth-local-issuer", "oauth-jwks-url",
		"oauth-algorithms", "oauth-leeway", "oauth-jwks-max-age", "oauth-jwks-min-refresh",
		"oauth-introspection-url", "oauth-introspection-client-id", "oauth-introspection-secret",
		"oauth-introspection-secret-file", "oauth-introspection-cache", "oauth-user-claim", "oauth-org-claim",
		"oauth-role-claim", "oauth-admin-scope", "oauth-member-scope", "oauth-viewer-scope",
		"oauth-token-url", "oauth-client-id", "oauth-client-secret", "oauth-client-secret-file", "oauth-audience", "oauth-scope"}},
	{"TLS", []string{"tls", "tls-ca", "grpc-tls-cert", "grpc-tls-key", "cluster-tls-cert", "cluster-tls-key", "cluster-tls-ca"}},
	{"Observability and diagnostics", []string{"log-level", "log-format", "trace-endpoint", "trace-tool-arguments", "enable-pprof", "enable-probe",
		"probe-idle", "probe-rate-limit"}},
}

// otherGroup is the heading of flags in no group.
const otherGroup = "Other"

// groupOf returns the group title of flag name ("Other" when none) and
// its place in the group.
func groupOf(name string) (string, int) {
	for _, g := range flagGroups {
		for i, n := range g.names {
			if n == name {
				return g.title, i
			}
		}
	}
	return otherGroup, 0
}

// printGroupedFlags prints fs's flags under their group headings, groups
// in flagGroups' order, "Other" last; hide drops flags by name.
func printGroupedFlags(w io.Writer, fs *flag.FlagSet, hide func(name string) bool) {
	byGroup := map[string][]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) {
		if hide == nil || !hide(f.Name) {
			g, _ := groupOf(f.Name)
			byGroup[g] = append(byGroup[g], f)
		}
	})
	titles := make([]string, 0, len(flagGroups)+1)
	for _, g := range flagGroups {
		titles = append(titles, g.title)
	}
	for _, title := range append(titles, otherGroup) {
		flags := byGroup[title]
		if len(flags) == 0 {
			continue
		}
		slices.SortStableFunc(flags, func(a, b *flag.Flag) int {
			_, i := groupOf(a.Name)
			_, j := groupOf(b.Name)
			return i - j
		})
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range flags {
			printFlag(w, f)
		}
	}
}

// printFlag prints one flag like flag.PrintDefaults does, except that a
// multi-line default is printed as indented lines, not a quoted string.
func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if name != "" {
		line += " " + name
	}
	fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	switch def := f.DefValue; {
	case isZeroDefault(def):
	case strings.Contains(def, "\n"):
		fmt.Fprintf(w, "\n    \t(default:\n    \t  %s)", strings.ReplaceAll(def, "\n", "\n    \t  "))
	case name == "string":
		fmt.Fprintf(w, " (default %q)", def)
	default:
		fmt.Fprintf(w, " (default %v)", def)
	}
	if commandLineOnly[f.Name] {
		fmt.Fprintln(w, "  [command line only]")
		return
	}
	fmt.Fprintf(w, "  [%s]\n", envName(f.Name))
}

// isZeroDefault reports whether a flag's default is not worth printing
// (its type's zero value, or an empty list).
func isZeroDefault(def string) bool {
	switch def {
	case "", "0", "0s", "false", "[]":
		return true
	}
	return false
}

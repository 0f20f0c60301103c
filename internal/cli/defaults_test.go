package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/membership/consul"
	"github.com/mcpgrain/mcpgrain/cluster/reminders"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/gateway"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/bench"
	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// packageDefaults are the flags whose default is a package's documented
// default (the zero-value rule of its options): the flag must show that
// value, so the two cannot drift apart.
var packageDefaults = map[string]any{
	// common
	"reminder-poll":        reminders.DefaultPollInterval,
	"trace-endpoint":       otlp.DefaultEndpoint,
	"trace-tool-arguments": otlp.DefaultToolArguments,
	// node
	"consul":           consul.DefaultAddress,
	"consul-ttl":       consul.DefaultTTL,
	"join-timeout":     cluster.DefaultJoinTimeout,
	"shutdown-timeout": app.DefaultShutdownTimeout,
	// MCP
	"approval-window":                engine.DefaultApprovalWindow,
	"body-timeout":                   gateway.DefaultBodyTimeout,
	"stream-keepalive":               exchange.DefaultStreamKeepalive,
	"max-in-flight":                  gateway.DefaultMaxInFlight(),
	"queue-wait":                     gateway.DefaultQueueWait,
	"session-ttl":                    session.DefaultSessionTTL,
	"task-ttl":                       tasks.DefaultTTL,
	"handle-ttl":                     handle.DefaultIdleTTL,
	"max-handles-per-principal":      handle.DefaultMaxPerPrincipal,
	"max-pending-asks-per-principal": mcpruntime.DefaultMaxPendingAsks,
	"session-timeout":                alarm.DefaultSessionTimeout,
	"paused-lease":                   alarm.DefaultPausedLease,
	"max-paused-idle":                alarm.DefaultMaxPausedIdle,
	"running-lease":                  alarm.DefaultRunningLease,
	"max-running-idle":               alarm.DefaultMaxRunningIdle,
	"approvers":                      policy.ApproversMember,
	"auth-failure-rate":              auth.DefaultFailureRate,
	"auth-failure-burst":             auth.DefaultFailureBurst,
	"event-max-bytes":                mcpruntime.DefaultMaxEventBytes,
	"event-session-bytes":            mcpruntime.DefaultSessionEventBytes,
	"event-principal-bytes":          mcpruntime.DefaultPrincipalEventBytes,
	"event-store-bytes":              mcpruntime.DefaultStoredEventBytes,
	"exec-timeout":                   sandbox.DefaultWallTime,
	"exec-max-tool-calls":            sandbox.DefaultMaxToolCalls,
	"exec-max-output":                sandbox.DefaultMaxOutput,
	"exec-max-running":               sandbox.DefaultMaxRunning(),
	"exec-max-running-per-user":      sandbox.DefaultMaxRunningPerTenant,
	"exec-slot-wait":                 sandbox.DefaultSlotWait,
	"execute-api-bytes":              tools.DefaultDeclarationBudget,
	"oauth-algorithms":               strings.Join(auth.DefaultAlgorithms, ","),
	"oauth-leeway":                   auth.DefaultLeeway,
	"oauth-jwks-max-age":             auth.DefaultKeysMaxAge,
	"oauth-jwks-min-refresh":         auth.DefaultKeysMinRefresh,
	"oauth-introspection-cache":      auth.DefaultIntrospectionCache,
	"oauth-user-claim":               auth.DefaultUserClaim,
	"oauth-org-claim":                auth.DefaultOrgClaim,
	"oauth-admin-scope":              auth.DefaultAdminScope,
	"oauth-member-scope":             auth.DefaultMemberScope,
	"oauth-viewer-scope":             auth.DefaultViewerScope,
	// bench
	"sessions":           bench.DefaultSessions,
	"concurrency":        bench.DefaultConcurrency,
	"restore-cap":        bench.DefaultRestoreCap,
	"scale-sessions":     bench.DefaultScaleSessions,
	"scale-revisit":      bench.RevisitEcho,
	"scale-distribution": bench.DistUniform,
	"scale-zipf-s":       bench.DefaultZipfS,
	"scale-zipf-v":       bench.DefaultZipfV,
	"scale-seed":         bench.DefaultZipfSeed,
	"scale-sample-every": bench.DefaultScaleSampleEvery,
	// approve
	"oauth-scope": auth.DefaultMemberScope,
}

// commandDefaults are the flags whose default is the command's own choice
// (no package has a default for it: its options' zero value means
// something else, such as "unlimited" or "off"), by command.
var commandDefaults = map[string][]string{
	"dev":     {"http", "grpc", "bind", "log-level", "log-format", "probe-idle", "probe-rate-limit", "data", "node-id", "demo-api", "tools", "rate-limit", "rate-burst", "resident-memory", "session-placement"},
	"node":    {"http", "grpc", "bind", "log-level", "log-format", "probe-idle", "probe-rate-limit", "cluster", "tools", "rate-limit", "rate-burst", "resident-memory", "session-placement"},
	"bench":   {"scenario", "duration", "warmup", "scale-resident-memory", "timeout"},
	"approve": {"grpc", "timeout"},
	"try":     {"url", "code", "wait"},
}

// TestFlagDefaultsAreTheirPackagesDefaults fails when a flag's default
// and the default of the package that owns the setting diverge, or when a
// flag with a default is in neither table above (a new flag must say
// where its default lives).
func TestFlagDefaultsAreTheirPackagesDefaults(t *testing.T) {
	var dev devCommand
	var node nodeCommand
	var b benchCommand
	var a approveFlags
	var try tryCommand
	sets := map[string]*flag.FlagSet{
		"dev": dev.flags(io.Discard), "node": node.flags(io.Discard),
		"bench": b.flags(io.Discard), "approve": a.flags(io.Discard), "try": try.flags(io.Discard),
	}
	for cmd, fs := range sets {
		own := map[string]bool{}
		for _, name := range commandDefaults[cmd] {
			own[name] = true
		}
		fs.VisitAll(func(f *flag.Flag) {
			want, packaged := packageDefaults[f.Name]
			switch {
			case own[f.Name]:
				if packaged {
					t.Errorf("%s --%s is in both tables", cmd, f.Name)
				}
			case packaged:
				if got := fmt.Sprint(want); f.DefValue != got {
					t.Errorf("%s --%s defaults to %s, its package's default is %s", cmd, f.Name, f.DefValue, got)
				}
			case !zeroDefault(f.DefValue):
				t.Errorf("%s --%s defaults to %q: add it to packageDefaults (a package's default) or commandDefaults (the command's own)", cmd, f.Name, f.DefValue)
			}
		})
	}
}

// zeroDefault reports whether a flag's default is its type's zero value.
func zeroDefault(v string) bool {
	switch v {
	case "", "0", "0s", "false":
		return true
	}
	return false
}

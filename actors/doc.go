// Package actors is the home of mcpgrain's grains and the runtime they host:
// the MCP session grain (session/), the pure idle-alarm policy (alarm/),
// executions (engine/), the sandbox (sandbox/), tool sources (tools/) and
// approval policies (policy/). Grains implement cluster/grain.Grain; the
// cluster layer activates them on their owner node. The built-in probe grain
// (cluster/probe) is the smallest example.
package actors

package tasks

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
)

// Code mode as tasks: execute (and resume) run in the task grain on an
// execution engine of its own, journaled under the task grain. A pause
// for approval is the tool's MRTR input request, so the task shows
// input_required with it; tasks/update with the decision runs the tool's
// next round, which resumes the execution — from the engine, or from its
// journal after the grain's activation (or its node) was lost.

// codeTools are the code pack's tools.
var codeTools = map[string]bool{"execute": true, "resume": true}

// isCodeTool reports whether tools/call params call a code-mode tool.
func isCodeTool(params string) bool {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal([]byte(params), &p)
	return codeTools[p.Name]
}

// codeRunner is a task grain's code runtime and the server it runs on.
type codeRunner struct {
	code   *mcpruntime.CodeRuntime
	runner *runner
}

// newCodeRunner builds the code runner of a task grain activation (which
// owns the grain: the journal is fenced by its epoch).
func newCodeRunner(h *Host, g grain.Context) *codeRunner {
	journal := engine.StoreJournal{Store: h.cfg.RunStore, Grain: grain.Key(g.Kind(), g.Identity()), Epoch: g.Epoch()}
	code := mcpruntime.NewCodeRuntime(h.cfg.CodeMode, g.Identity(), nil, journal)
	return &codeRunner{code: code, runner: &runner{newServer: func() (*mcp.Server, func(), error) {
		return h.cfg.NewServer(code.Register)
	}}}
}

// close ends the grain's executions (a paused one stays in its journal)
// and stops its server.
func (c *codeRunner) close() {
	c.code.Shutdown()
	c.runner.close()
}

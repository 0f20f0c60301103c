// Command deploy is an MCP server on mcpgrain whose one tool, deploy,
// asks a human before it deploys (mcpgrain.Ask) and performs the
// deployment in a journaled step (mcpgrain.Step), so that after the loss
// of its node the client's retry of the call deploys exactly once. Run it
// as a node:
//
//	go run ./examples/deploy dev
//
// call deploy at the printed MCP endpoint, and decide on any approval
// surface: the inbox at /approvals, `deploy approve list` and
// `deploy approve accept ID`, or POST /api/executions/ID/resume.
//
// The "deployment" appends a line to the file $DEPLOY_LOG (default
// deployments.log): "deployed SERVICE VERSION". Before it asks, the tool
// appends "requested SERVICE VERSION": work that is not in a Step, so it
// runs again when the handler is run again after a node loss (see
// docs/sdk.md §4).
//
// request_deploy asks without waiting (mcpgrain.AskLater): it answers at
// once with the request's id and approval page, and deploy_status, called
// later (in the same session or another of the same user, or from a
// 2026-07-28 request: the two also work there, the question then owned by
// the request's continuation grain), reports the decision and deploys
// once when approved (mcpgrain.AskStatus). finish_deploy, called later
// from any session of the same user, continues the request on the session
// that asked it (mcpgrain.ContinueAsk): the continuation finish_deploy
// runs there once with the decision, deploys if approved, and its answer
// is recorded and returned to every later finish_deploy.
//
// A 2026-07-28 (sessionless) client is asked too: its call ends with an
// input_required result asking for the approval, the question is listed
// on the same surfaces, and the client's retry (with its answer, or with
// none once an approver decided) runs the handler again, which deploys
// once. The handler returns Ask's error as it is for that.
//
// A 2026-07-28 client that declares the MCP tasks extension gets deploy
// as a task (Server.Tasks): the task waits in input_required while the
// question is listed on the same surfaces, an approver's decision there
// (or the task owner's tasks/update, if their role may decide) resumes
// it, and tasks/get shows the result.
package main

import (
	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/examples/deploy/deploytool"
)

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:     "deploy",
		Version:  "1.0.0",
		Register: deploytool.Register,
		// finish_deploy: the continuation request_deploy's question names,
		// run on the asking session by the finish_deploy tool.
		Continuations: deploytool.Continuations(),
		// deploy may run as an MCP task: a client that declares the tasks
		// extension follows it with tasks/get, and its question is the
		// task's input_required, decided on the approval surfaces.
		Tasks: map[string]mcpgrain.TaskMode{"deploy": mcpgrain.TaskOptional},
	})
}

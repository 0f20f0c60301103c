package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// The deploy worker's checker: an SDK program's Ask and Step
// (examples/deploy: deploy asks a human, then deploys in a journaled step)
// over faults. Each worker deploy has a service name unique in the run; an
// approver accepts or declines it through the HTTP approval API, and the
// worker retries the call (the same arguments on the same session) until
// it is answered. The deployments are the lines "deployed SERVICE
// VERSION" of the nodes' shared deployment log. What a client saw is held
// to exactly-once visible effects:
//
//   - no service is deployed twice, whatever its outcome;
//   - an accepted deploy whose call was answered with its deployment
//     happened exactly once;
//   - a declined deploy never happened, and its answer (if any) says it
//     was declined;
//   - nothing the worker never asked for was deployed.
//
// An accepted deploy whose call was never answered (cut by the end of the
// run, or its session lost) has an unknown outcome: at most once.

// DeployOp is one deploy of the worker: its service, the approver's
// action, and the call's answer.
type DeployOp struct {
	// Service is the deploy's service, unique in the run.
	Service string
	// Accept is the approver's action: accept (true) or decline.
	Accept bool
	// Answered is set when a call of the deploy got a result.
	Answered bool
	// Result is the text of that result.
	Result string
}

// DeployOnce checks the worker's deploys against the deployment log's
// lines and returns the violations.
func DeployOnce(ops []DeployOp, log []string) []string {
	count := map[string]int{}
	for _, l := range log {
		if svc, ok := strings.CutPrefix(l, "deployed "); ok {
			svc, _, _ = strings.Cut(svc, " ")
			count[svc]++
		}
	}
	var out []string
	asked := map[string]bool{}
	for _, op := range ops {
		asked[op.Service] = true
		n := count[op.Service]
		switch {
		case n > 1:
			out = append(out, fmt.Sprintf("deploy %s: deployed %d times", op.Service, n))
		case !op.Accept && n > 0:
			out = append(out, fmt.Sprintf("deploy %s: declined, yet deployed", op.Service))
		case op.Accept && op.Answered && n == 0:
			out = append(out, fmt.Sprintf("deploy %s: answered %q, yet never deployed", op.Service, op.Result))
		}
		if op.Answered && !strings.HasPrefix(op.Result, want(op)) {
			out = append(out, fmt.Sprintf("deploy %s: answered %q, want %q...", op.Service, op.Result, want(op)))
		}
	}
	var unknown []string
	for svc := range count {
		if !asked[svc] {
			unknown = append(unknown, svc)
		}
	}
	slices.Sort(unknown)
	for _, svc := range unknown {
		out = append(out, fmt.Sprintf("deploy %s: deployed, never asked for", svc))
	}
	return out
}

// want is the start of the answer op's decision owes.
func want(op DeployOp) string {
	if op.Accept {
		return "deployed " + op.Service + " "
	}
	return "deploy of " + op.Service + " "
}

// DeployCounts sums what the deploys show: sent, accepted and answered,
// declined and answered, and not answered.
func DeployCounts(ops []DeployOp) (sent, accepted, declined, unanswered int) {
	for _, op := range ops {
		sent++
		switch {
		case !op.Answered:
			unanswered++
		case op.Accept:
			accepted++
		default:
			declined++
		}
	}
	return sent, accepted, declined, unanswered
}

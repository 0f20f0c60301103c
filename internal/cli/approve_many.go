package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// approveCommands is each approve command's usage line and summary, for
// `mcpgrain approve <command> -h`.
var approveCommands = map[string][2]string{
	"list":    {"list [-q] [--json]", "Lists the executions of your organization paused for approval."},
	"show":    {"show EXECUTION_ID", "Shows one paused execution, with its arguments."},
	"accept":  {"accept EXECUTION_ID... | --all", "Accepts paused executions: each tool call runs and its execution goes on.\nEach id is decided on its own (your role is checked for each) and its outcome printed;\nwith no id and no --all, it lists what is waiting."},
	"decline": {"decline EXECUTION_ID... | --all [--reason TEXT]", "Declines paused executions: each call fails with a declined error.\nEach id is decided on its own (your role is checked for each) and its outcome printed;\nwith no id and no --all, it lists what is waiting."},
	"watch":   {"watch", "Prints each paused execution as it appears (Ctrl-C stops)."},
}

// approveOnlyFlags are flags that concern one or two approve commands
// only: a command's help hides the others'.
var approveOnlyFlags = map[string][]string{"q": {"list"}, "reason": {"decline"}, "all": {"accept", "decline"}}

// setApproveCommandUsage makes fs's usage (-h) the help of approve
// command cmd, when cmd is one.
func setApproveCommandUsage(fs *flag.FlagSet, cmd string) {
	c, ok := approveCommands[cmd]
	if !ok {
		return
	}
	w := fs.Output()
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: %s %s [flags]\n\n%s\n\nFlags, by group (each also settable as the MCPGRAIN_<FLAG> shown in brackets):\n", fs.Name(), c[0], c[1])
		printGroupedFlags(w, fs, func(name string) bool {
			only, ok := approveOnlyFlags[name]
			return ok && !strings.Contains(strings.Join(only, ","), cmd)
		})
	}
}

// outcomeWords map an older node's decision statuses to the approval
// outcomes' words: the MCP elicitation actions (accept, decline,
// cancel) as past participles, which nodes now answer with.
var outcomeWords = map[string]string{"approved": "accepted", "denied": "declined", "canceled": "cancelled"}

// outcomeWord returns the word for a decision's status.
func outcomeWord(status string) string {
	if w, ok := outcomeWords[status]; ok {
		return w
	}
	return status
}

// approveDecideAll decides (action: accept or decline) each of ids, or
// every waiting execution with --all, printing each outcome; it fails if
// any decision failed. With neither ids nor --all it lists what is
// waiting and asks to choose.
func approveDecideAll(ctx context.Context, client pb.ApprovalServiceClient, f approveFlags, action string, ids []string, w io.Writer) error {
	if len(ids) == 0 {
		resp, err := client.ListPausedExecutions(ctx, &pb.ListPausedExecutionsRequest{})
		if err != nil {
			return rpcError(err)
		}
		waiting := resp.GetExecutions()
		if len(waiting) == 0 {
			if f.all {
				fmt.Fprintln(w, "no paused executions")
				return nil
			}
			return fmt.Errorf("%w: approve %s needs an execution id, and no execution is waiting", errUsage, action)
		}
		if !f.all {
			var list bytes.Buffer
			_ = printList(&list, waiting, false)
			return fmt.Errorf("%w: approve %s needs execution ids (or --all); waiting:\n%s", errUsage, action, strings.TrimRight(list.String(), "\n"))
		}
		for _, p := range waiting {
			ids = append(ids, p.GetExecutionId())
		}
	}
	var errs []error
	for _, id := range ids {
		if err := approveDecide(ctx, client, f, action, id, w); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	if len(ids) > 1 && len(errs) > 0 {
		return fmt.Errorf("%d of %d not decided: %w", len(errs), len(ids), errors.Join(errs...))
	}
	return errors.Join(errs...)
}

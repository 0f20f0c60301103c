package cli

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestEveryFlagHasAGroup fails when a flag of dev, node, approve or try
// is in no group of flagGroups (its help would list it under "Other"),
// or in two.
func TestEveryFlagHasAGroup(t *testing.T) {
	var dev devCommand
	var node nodeCommand
	var a approveFlags
	var try tryCommand
	sets := map[string]*flag.FlagSet{"dev": dev.flags(io.Discard), "node": node.flags(io.Discard),
		"approve": a.flags(io.Discard), "try": try.flags(io.Discard)}
	seen := map[string]int{}
	for _, g := range flagGroups {
		for _, n := range g.names {
			seen[n]++
		}
	}
	for n, c := range seen {
		if c > 1 {
			t.Errorf("flag --%s is in %d groups", n, c)
		}
	}
	for cmd, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			if g, _ := groupOf(f.Name); g == otherGroup {
				t.Errorf("%s --%s is in no group of flagGroups (internal/cli/help.go): add it to one", cmd, f.Name)
			}
		})
	}
}

// TestGroupedHelp checks dev -h lists the basics first, groups in order,
// every flag once, an unknown flag under "Other", and no quoted newline.
func TestGroupedHelp(t *testing.T) {
	var dev devCommand
	var out bytes.Buffer
	fs := dev.flags(&out)
	fs.Bool("zz-new-flag", false, "a flag nobody grouped yet")
	fs.Usage()
	help := out.String()
	order := []string{"\nBasics:\n", "\nApprovals:\n", "\nLimits:\n", "\nCluster:\n", "\nOAuth:\n", "\nTLS:\n", "\nObservability and diagnostics:\n", "\nOther:\n"}
	last := -1
	for _, h := range order {
		i := strings.Index(help, h)
		if i <= last {
			t.Fatalf("heading %q at %d, want after %d:\n%s", strings.TrimSpace(h), i, last, help)
		}
		last = i
	}
	if i := strings.Index(help, "--http "); i < 0 || i > strings.Index(help, "\nApprovals:\n") {
		t.Errorf("--http is not among the basics:\n%s", help)
	}
	if !strings.Contains(help[last:], "--zz-new-flag") {
		t.Errorf("an ungrouped flag is not under Other:\n%s", help[last:])
	}
	fs.VisitAll(func(f *flag.Flag) {
		if n := strings.Count(help, "  --"+f.Name+" ") + strings.Count(help, "  --"+f.Name+"\n"); n != 1 {
			t.Errorf("--%s listed %d times", f.Name, n)
		}
	})
	var tryOut bytes.Buffer
	var try tryCommand
	try.flags(&tryOut).Usage()
	if strings.Contains(tryOut.String(), `\n`) {
		t.Errorf("try -h shows a quoted newline:\n%s", tryOut.String())
	}
}

// TestApproveCommandHelp checks `approve <command> -h` prints that
// command's help, with only its own flags.
func TestApproveCommandHelp(t *testing.T) {
	for cmd, want := range map[string]string{"list": "Usage: mcpgrain approve list", "accept": "--all", "decline": "--reason"} {
		var out bytes.Buffer
		code := run([]string{"approve", cmd, "-h"}, io.Discard, &out)
		if code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("approve %s -h: exit %d, want %q in:\n%s", cmd, code, want, out.String())
		}
		if strings.Contains(out.String(), "Commands:") {
			t.Errorf("approve %s -h printed the general help:\n%s", cmd, out.String())
		}
	}
	var out bytes.Buffer
	run([]string{"approve", "list", "-h"}, io.Discard, &out)
	if strings.Contains(out.String(), "--reason") || strings.Contains(out.String(), "--all") {
		t.Errorf("approve list -h shows decline's or accept's flags:\n%s", out.String())
	}
}

// TestApproveAllIsCommandLineOnly: MCPGRAIN_ALL left in the environment
// does not turn `approve accept` into accepting everything.
func TestApproveAllIsCommandLineOnly(t *testing.T) {
	t.Setenv("MCPGRAIN_ALL", "true")
	var f approveFlags
	fs := f.flags(io.Discard)
	if _, _, err := parseApprove(fs, []string{"accept"}); err != nil {
		t.Fatal(err)
	}
	if f.all {
		t.Fatal("MCPGRAIN_ALL set --all")
	}
	if _, _, err := parseApprove(fs, []string{"accept", "--all"}); err != nil || !f.all {
		t.Fatalf("--all on the command line: %v %v", f.all, err)
	}
}

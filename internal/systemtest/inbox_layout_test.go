package systemtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// overflowJS lists what sticks out of the viewport horizontally: the
// document itself (scrollWidth beyond innerWidth: the page scrolls
// sideways) and every element wider than the viewport or reaching past
// its right edge (content inside a scrolling <pre> is text, not an
// element, so a long argument scrolling in its box is not reported).
//
// It is a format: %d is the width the viewport was set to (a phone's
// browser widens its layout viewport, and innerWidth with it, to fit
// content that overflows, so innerWidth alone hides the overflow).
const overflowJS = `(() => {
  const w = %d, out = [];
  if (window.innerWidth > w) out.push("innerWidth " + window.innerWidth + " > " + w + " (the page was zoomed out to fit)");
  if (document.documentElement.scrollWidth > w) out.push("document scrollWidth " + document.documentElement.scrollWidth + " > innerWidth " + w);
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width > w + 0.5 || r.right > w + 0.5) out.push(e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " right " + Math.round(r.right) + " width " + Math.round(r.width));
  }
  return out;
})()`

// TestApprovalsInboxLayoutInHeadlessChromium renders the inbox — a
// waiting execution and a history with a long decline reason — at desktop
// (1280 px) and phone (390 px) width in headless Chromium and fails when
// anything overflows the viewport horizontally (ids cut, a table wider
// than the screen). It saves a screenshot of each width in the test's
// temporary directory (or MCPGRAIN_TEST_SCREENSHOTS, to keep them) and
// logs its path.
func TestApprovalsInboxLayoutInHeadlessChromium(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	declined := pause(t, cs, "waiting_for_interaction")
	reason := "not today: the to-do list is frozen until the release ships, ask in #release-" + strings.Repeat("x", 60)
	if r := api(t, "POST", "http://"+info.HTTPAddr+"/api/executions/"+declined+"/resume", bobToken,
		fmt.Sprintf(`{"action":"decline","content":{"reason":%q}}`, reason)); r.status != 200 || r.body["status"] != "declined" {
		t.Fatalf("decline: %d %v", r.status, r.body)
	}
	waiting := pause(t, cs, "waiting_for_interaction")
	tab := inboxTab(t, browser(t), info.HTTPAddr, aliceToken, true)
	dir := t.TempDir()
	if keep := os.Getenv("MCPGRAIN_TEST_SCREENSHOTS"); keep != "" { // keep them past the test
		dir = keep
	}
	for _, width := range []int64{1280, 390} {
		if _, err := chromedp.Call(tab, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: width, Height: 844, DeviceScaleFactor: 1, Mobile: width < 600}); err != nil {
			t.Fatal(err)
		}
		browse(t, tab, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(entry(waiting)+" button.approve")),
			chromedp.WaitVisible(chromedp.CSS(`tr.decision[data-id="`+declined+`"] .why`)))
		if why := text(t, tab, `tr.decision[data-id="`+declined+`"] .why`); why != reason {
			t.Errorf("%d px: the decline's reason shows as %q, want %q", width, why, reason)
		}
		if id := text(t, tab, entry(waiting)+" a.details code"); id != waiting {
			t.Errorf("%d px: the execution id shows as %q, want %q", width, id, waiting)
		}
		shot := filepath.Join(dir, fmt.Sprintf("inbox-%dpx.png", width))
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d px: screenshot %s", width, shot)
		checkOverflow(t, tab, width, "the inbox", shot)
	}
	// The waiting execution's own page, at phone width.
	browse(t, tab, chromedp.Navigate("http://"+info.HTTPAddr+"/approve/"+waiting), chromedp.WaitVisible(chromedp.CSS("button.approve")))
	checkOverflow(t, tab, 390, "the approval page", "")
}

// checkOverflow fails the test when the page in tab overflows a viewport
// of width px (shot: its screenshot, named in the failure).
func checkOverflow(t *testing.T, tab context.Context, width int64, what, shot string) {
	t.Helper()
	over, err := chromedp.Run(tab, chromedp.Evaluate[[]string](fmt.Sprintf(overflowJS, width)))
	if err != nil {
		t.Fatal(err)
	}
	if len(over) > 0 {
		t.Errorf("%d px: %s overflows the viewport (screenshot %q):\n  %s", width, what, shot, strings.Join(over, "\n  "))
	}
}

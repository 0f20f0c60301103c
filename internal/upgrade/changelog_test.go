package upgrade_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// TestChangelogNamesThePreviousRelease checks that CHANGELOG.md's latest
// release heading ("## vX.Y.Z — commit <hash>") names the commit in
// tools/previous/COMMIT, which the upgrade test, tools/previous/build.sh
// and CI's buf breaking use.
func TestChangelogNamesThePreviousRelease(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	commit, err := os.ReadFile(filepath.Join(root, "tools/previous/COMMIT"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v\S+) — commit ([0-9a-f]{40})$`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal(`CHANGELOG.md: no release heading "## vX.Y.Z — commit <full hash>"`)
	}
	if got, want := string(m[2]), strings.TrimSpace(string(commit)); got != want {
		t.Errorf("CHANGELOG.md's latest release %s is commit %s, tools/previous/COMMIT says %s", m[1], got, want)
	}
}

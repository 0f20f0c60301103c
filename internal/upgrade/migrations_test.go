package upgrade_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// schemaStatement matches the schema statements migrations are made of.
var schemaStatement = regexp.MustCompile(`^(CREATE (UNIQUE )?(TABLE|INDEX)|ALTER TABLE|DROP (TABLE|INDEX|VIEW|SEQUENCE|TRIGGER|FUNCTION|TYPE|SCHEMA) )`)

// contracting matches what an expand-only migration must not do: anything
// that breaks a node of the previous release still reading and writing
// the store during a rolling upgrade (docs/operations.md, "Expand, then
// contract").
var contracting = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`\bDROP\b`), "drops what older nodes use"},
	{regexp.MustCompile(`\bRENAME\b`), "renames what older nodes use"},
	{regexp.MustCompile(`\bALTER COLUMN\b.*\bTYPE\b`), "changes a column's type"},
	{regexp.MustCompile(`\bSET NOT NULL\b`), "makes a column older nodes may leave empty required"},
	{regexp.MustCompile(`\bADD CONSTRAINT\b`), "adds a constraint older nodes' writes may break"},
	{regexp.MustCompile(`\bADD COLUMN\b[^,]*\bNOT NULL\b`), "adds a NOT NULL column without a DEFAULT (older nodes' inserts omit it)"},
}

// contracts returns why stmt (normalised, upper case) is not expand-only,
// or "" when it is.
func contracts(stmt string) string {
	for _, c := range contracting {
		if c.re.MatchString(stmt) {
			if strings.Contains(c.why, "DEFAULT") && strings.Contains(stmt, " DEFAULT ") {
				continue
			}
			return c.why
		}
	}
	return ""
}

func TestContractingStatementsAreRecognised(t *testing.T) {
	for stmt, want := range map[string]bool{
		"ALTER TABLE TASKS ADD COLUMN ROLE TEXT NOT NULL DEFAULT ''":   false,
		"ALTER TABLE TASKS ADD COLUMN LEASE BIGINT":                    false,
		"CREATE TABLE T (A TEXT NOT NULL, B BIGINT NOT NULL)":          false,
		"CREATE INDEX TASKS_EXPIRES ON TASKS (EXPIRES_AT_MS)":          false,
		"ALTER TABLE TASKS ADD COLUMN ROLE TEXT NOT NULL":              true,
		"ALTER TABLE TASKS DROP COLUMN ROLE":                           true,
		"DROP TABLE MCP_EVENTS":                                        true,
		"ALTER TABLE TASKS RENAME COLUMN ROLE TO ROLES":                true,
		"ALTER TABLE TASKS ALTER COLUMN ATTEMPTS TYPE INTEGER":         true,
		"ALTER TABLE TASKS ALTER COLUMN ROLE SET NOT NULL":             true,
		"ALTER TABLE TASKS ADD CONSTRAINT ROLE_SET CHECK (ROLE <> '')": true,
	} {
		if got := contracts(stmt) != ""; got != want {
			t.Errorf("contracts(%q) = %q, want contracting %v", stmt, contracts(stmt), want)
		}
	}
}

// schemaStatements collects the schema statements in the Go string
// literals of the module's non-test files under dir (the cluster store
// and the domain stores that register their own migrations: tasks, runs,
// the directory, the event log), normalised: upper case, single spaces.
func schemaStatements(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || path == filepath.Join(dir, "tools")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // not ours to judge here
		}
		rel, _ := filepath.Rel(dir, path)
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if stmt := strings.ToUpper(strings.Join(strings.Fields(s), " ")); err == nil && schemaStatement.MatchString(stmt) {
				out[stmt] = rel
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// previousTree extracts the previous release's tree (tools/previous/COMMIT)
// from the repository's history; it skips (or fails, with
// MCPGRAIN_INTEGRATION=1) when the history does not hold it.
func previousTree(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "tools/previous/COMMIT"))
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(b))
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", commit, dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("MCPGRAIN_INTEGRATION") == "1" {
			t.Fatalf("extract the previous release %s: %v\n%s", commit, err, out)
		}
		t.Skipf("the previous release %s is not in this clone's history: %v", commit, err)
	}
	return dir
}

// TestStoreMigrationsSinceThePreviousReleaseAreExpandOnly compares the
// schema statements of the previous release's tree with this tree's: no
// released statement may change or go (a released migration is never
// edited), and every statement added since must be expand-only, so that
// nodes of the previous release keep working against a store the first
// upgraded node has migrated.
func TestStoreMigrationsSinceThePreviousReleaseAreExpandOnly(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	prev := schemaStatements(t, previousTree(t, root))
	cur := schemaStatements(t, root)
	if len(prev) == 0 || len(cur) == 0 {
		t.Fatalf("found %d schema statements in the previous release and %d here: the search is broken", len(prev), len(cur))
	}
	for _, stmt := range slices.Sorted(mapsKeys(prev)) {
		if _, ok := cur[stmt]; !ok {
			t.Errorf("a released schema statement (%s in the previous release) changed or went: %.200s", prev[stmt], stmt)
		}
	}
	var added []string
	for _, stmt := range slices.Sorted(mapsKeys(cur)) {
		if _, ok := prev[stmt]; ok {
			continue
		}
		added = append(added, stmt)
		if why := contracts(stmt); why != "" {
			t.Errorf("%s: a migration added since the previous release %s; expand now, contract in a later release (docs/operations.md): %.200s", cur[stmt], why, stmt)
		}
	}
	t.Logf("%d schema statements in the previous release, %d here, %d added since: %v", len(prev), len(cur), len(added), added)
}

// Prose that starts like a statement (a tool's description) is not a
// schema statement; statements are.
func TestSchemaStatementIgnoresProse(t *testing.T) {
	for stmt, want := range map[string]bool{
		"DROP THIS SESSION'S NOTES.":             false,
		"CREATE A NOTE.":                         false,
		"DROP TABLE MCP_EVENTS":                  true,
		"DROP INDEX SDK_CALLS_OPEN":              true,
		"CREATE UNIQUE INDEX X ON T (A)":         true,
		"ALTER TABLE TASKS ADD COLUMN X INTEGER": true,
	} {
		if got := schemaStatement.MatchString(stmt); got != want {
			t.Errorf("schemaStatement.MatchString(%q) = %v, want %v", stmt, got, want)
		}
	}
}

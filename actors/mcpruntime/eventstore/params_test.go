package eventstore

import (
	"strconv"
	"strings"
	"testing"
)

// SQLite's batched statements bind anonymous parameters (a $N parameter
// is a named one there, and binding looks every name up in a list of
// all of them: quadratic in a 64-row INSERT's 448); Postgres's number
// them. Every row of every size has its parameters.
func TestBatchedStatementsParametersByDialect(t *testing.T) {
	for _, c := range []struct {
		dialect string
		cols    [2]int
	}{{"sqlite", [2]int{eventColumns, 3}}, {"postgres", [2]int{eventColumns, 3}}} {
		texts := insertTexts(c.dialect)
		for k, stmt := range texts {
			for n := 1; n <= eventsPerInsert; n++ {
				text, params := stmt[n], n*c.cols[k]
				anonymous, numbered := strings.Count(text, "?"), strings.Count(text, "$")
				if c.dialect == "sqlite" && (anonymous != params || numbered != 0) {
					t.Fatalf("sqlite statement %d of %d rows: %d ? and %d $, want %d ?", k, n, anonymous, numbered, params)
				}
				if c.dialect == "postgres" && (numbered != params || anonymous != 0 || !strings.Contains(text, "$"+strconv.Itoa(params)+")")) {
					t.Fatalf("postgres statement %d of %d rows: %d $ and %d ?, want $1…$%d", k, n, numbered, anonymous, params)
				}
			}
		}
	}
}

package directory_test

import (
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

// The reason a directory entry keeps is the same whoever writes it (the
// session grain from the decision's JSON, a surface from its parsed
// content): trimmed, cut on a character boundary, nothing for a content
// without a string reason.
func TestReasonShownOf(t *testing.T) {
	long := strings.Repeat("é", directory.MaxReasonShown) // 2 bytes each: the cut falls mid-character
	for _, tc := range []struct{ content, want string }{
		{``, ""},
		{`not json`, ""},
		{`{}`, ""},
		{`{"reason": 5}`, ""},
		{`{"reason": "  too risky \n"}`, "too risky"},
		{`{"reason": "` + long + `"}`, strings.Repeat("é", directory.MaxReasonShown/2) + "…"},
	} {
		if got := directory.ReasonShownOf(tc.content); got != tc.want {
			t.Errorf("ReasonShownOf(%.40q) = %.40q, want %.40q", tc.content, got, tc.want)
		}
	}
}

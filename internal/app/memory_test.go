package app

import (
	"strings"
	"testing"
)

func TestParseResidentMemory(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  string
	}{
		{"0", 0, ""},
		{"512MiB", 512 << 20, ""},
		{" 4GiB ", 4 << 30, ""},
		{"1MB", 1_000_000, ""},
		{"auto", DefaultResidentMemory(), ""},
		{"", DefaultResidentMemory(), ""},
		{"lots", 0, `"lots": want a size such as 4GiB`},
	}
	for _, tc := range cases {
		got, err := ParseResidentMemory(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseResidentMemory(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseResidentMemory(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

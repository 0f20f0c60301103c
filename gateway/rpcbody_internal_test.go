package gateway

import (
	"encoding/json"
	"testing"
)

// jsonString reads a method or tool name without a decoder when it can;
// whatever the value, it must read what encoding/json reads ("" for a
// value that is not a string).
func TestJSONStringReadsWhatTheDecoderReads(t *testing.T) {
	for _, raw := range []string{
		`"tools/call"`, `"resume"`, `""`, `"r\u0065sume"`, `"a\"b"`, `"tab\there"`,
		"\"ctl\x01\"", "\"bad\xffutf8\"", `"é"`, `null`, `12`, `{"a":1}`, `"`, `"unterminated`, ``, `"a"b"`,
	} {
		var want string
		if json.Unmarshal([]byte(raw), &want) != nil {
			want = ""
		}
		if got := jsonString(json.RawMessage(raw)); got != want {
			t.Errorf("jsonString(%q) = %q, want %q", raw, got, want)
		}
	}
}

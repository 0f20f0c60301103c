package exchange

import (
	"encoding/json"
	"slices"
	"testing"
)

// A quiet event stream gets a keepalive comment between two events, and
// only there: not before the head (the response may not be an event
// stream), not on a JSON response, not inside an event, not after the end.
// The comment changes nothing else: event ids stay tagged, the response
// is recognised.
func TestRelayKeepalive(t *testing.T) {
	id := json.RawMessage(`7`)
	tag := eventIDSuffix(id)
	keepalive := "write " + string(KeepaliveComment)
	response := "event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	taggedResponse := "event: message\nid: s_1" + tag + "\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	quiet := ev(evQuiet)
	for _, tc := range []struct {
		name     string
		events   []event
		want     []string
		wantDone bool
	}{
		{name: "a quiet event stream gets a comment each quiet interval",
			events: []event{frame(sseHead, "", false, ""), quiet, quiet},
			want:   []string{"head 200", "flush", keepalive, "flush", keepalive, "flush"}},
		{name: "a quiet stream after its priming event gets a comment, and its response stays tagged",
			events: []event{frame(sseHead, "id: s_0\ndata: \n\n", false, ""), quiet, frame(nil, response, true, "")},
			want:   []string{"head 200", "write id: s_0" + tag + "\ndata: \n\n", "flush", keepalive, "flush", "write " + taggedResponse}, wantDone: true},
		{name: "nothing before the head",
			events: []event{quiet, frame(sseHead, "", false, "")},
			want:   []string{"head 200", "flush"}},
		{name: "nothing on a JSON response",
			events: []event{frame(jsonHead, "{", false, ""), quiet},
			want:   []string{"head 200", "write {", "flush"}},
		{name: "nothing inside an event; once it ended, a comment",
			events: []event{frame(sseHead, "event: message\ndata: x\n", false, ""), quiet, frame(nil, "\n", false, ""), quiet},
			want:   []string{"head 200", "write event: message\ndata: x\n", "flush", "write \n", "flush", keepalive, "flush"}},
		{name: "nothing inside a line the tagger holds back",
			events: []event{frame(sseHead, "event: message\nid: s_", false, ""), quiet},
			want:   []string{"head 200", "write event: message\n", "flush"}},
		{name: "nothing after the end",
			events: []event{frame(sseHead, response, true, ""), quiet},
			want:   []string{"head 200", "write " + taggedResponse}, wantDone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newRelay(id, false)
			s := &rl
			var got []string
			for _, e := range tc.events {
				got = append(got, render(stepList(s, e))...)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions:\n got %q\nwant %q", got, tc.want)
			}
			if s.done != tc.wantDone {
				t.Errorf("done = %v, want %v", s.done, tc.wantDone)
			}
		})
	}
}

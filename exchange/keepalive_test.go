package exchange

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
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

// A POST call slow to start (no priming event) is opened as an event
// stream by the gateway at the first quiet interval, so it can carry
// keepalives: the grain's events follow on it; a response that turns out
// not to be an event stream goes out as one message event, or, if it is
// not JSON, as the restart error for the call.
func TestRelayOpensASlowCallsEventStream(t *testing.T) {
	id := json.RawMessage(`7`)
	tag := eventIDSuffix(id)
	keepalive := "write " + string(KeepaliveComment)
	restart := "write " + string(RestartingEvent(id))
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	response := "event: message\nid: s_1\ndata: " + answer + "\n\n"
	quiet := ev(evQuiet)
	for _, tc := range []struct {
		name   string
		events []event
		want   []string
	}{
		{name: "the grain's event stream follows the gateway's head",
			events: []event{quiet, quiet, frame(sseHead, response, true, "")},
			want:   []string{"head 200", keepalive, "flush", keepalive, "flush", "write event: message\nid: s_1" + tag + "\ndata: " + answer + "\n\n"}},
		{name: "a JSON answer becomes one message event",
			events: []event{quiet, frame(jsonHead, "{\"jsonrpc\": \"2.0\",", false, ""), frame(nil, `"id":7,"result":{}}`, true, "")},
			want:   []string{"head 200", keepalive, "flush", "flush", "write event: message\ndata: " + answer + "\n\n"}},
		{name: "a plain-text error becomes the restart error for the call",
			events: []event{quiet, frame(&pb.ExchangeHead{Status: 400}, "Bad Request", true, "")},
			want:   []string{"head 200", keepalive, "flush", restart, "flush"}},
		{name: "a handler failing after the gateway's head ends with the restart error",
			events: []event{quiet, frame(nil, "", true, "handler panicked")},
			want:   []string{"head 200", keepalive, "flush", "log WARN", restart, "flush"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newRelay(id, false)
			s := &rl
			s.early = true
			var got []string
			for _, e := range tc.events {
				got = append(got, render(stepList(s, e))...)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions:\n got %q\nwant %q", got, tc.want)
			}
			if !s.done {
				t.Error("not done")
			}
		})
	}
}

// Only a POST of one call whose client accepts an event stream is opened
// early.
func TestOpensEarly(t *testing.T) {
	for _, tc := range []struct {
		method, accept string
		answerable     bool
		want           bool
	}{
		{"POST", "application/json, text/event-stream", true, true},
		{"POST", "application/json", true, false},
		{"POST", "application/json, text/event-stream", false, false},
		{"GET", "text/event-stream", true, false},
	} {
		r := httptest.NewRequest(tc.method, "/mcp", strings.NewReader(""))
		r.Header.Set("Accept", tc.accept)
		if got := opensEarly(r, tc.answerable); got != tc.want {
			t.Errorf("%s %q answerable=%v: %v, want %v", tc.method, tc.accept, tc.answerable, got, tc.want)
		}
	}
}

// The relay arms its keepalive timer only for a response that goes on
// after its first frame: one complete in it (a quick answer, a 202) runs
// no timer; one that streams on gets it, from after the first frame's
// writes.
func TestRelayArmsKeepaliveOnlyForAResponseThatGoesOn(t *testing.T) {
	id := json.RawMessage(`7`)
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	for _, tc := range []struct {
		name      string
		first     *pb.ExchangeFrame
		rest      []any
		wantTimer bool
	}{
		{name: "complete in its first frame", first: &pb.ExchangeFrame{Head: jsonHead, Data: []byte(answer), End: true}},
		{name: "a 202 without a body", first: &pb.ExchangeFrame{Head: &pb.ExchangeHead{Status: 202}, End: true}},
		{name: "an event stream that goes on", first: &pb.ExchangeFrame{Head: sseHead, Data: []byte("id: s_0\ndata: \n\n")},
			rest: []any{&pb.ExchangeFrame{Data: []byte("event: message\nid: s_1\ndata: " + answer + "\n\n"), End: true}}, wantTimer: true},
		{name: "no first frame", rest: []any{&pb.ExchangeFrame{Head: jsonHead, Data: []byte(answer), End: true}}, wantTimer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newRelay(id, false)
			stream := &responseStream{ready: make(chan struct{}, 1), queue: tc.rest}
			if len(tc.rest) > 0 {
				stream.ready <- struct{}{}
			}
			w := httptest.NewRecorder()
			l := relayIO{f: &Forwarder{keepalive: time.Hour}, w: w, r: httptest.NewRequest("POST", "/mcp", nil), reqID: id}
			l.run(&rl, tc.first, stream, nil)
			if !rl.done {
				t.Fatal("the relay did not finish")
			}
			if got := l.quiet != nil; got != tc.wantTimer {
				t.Errorf("keepalive timer armed = %v, want %v", got, tc.wantTimer)
			}
			if !strings.Contains(w.Body.String(), answer) && tc.first.GetHead().GetStatus() != 202 {
				t.Errorf("the answer did not reach the client: %q", w.Body.String())
			}
		})
	}
}

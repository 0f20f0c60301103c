package exchange

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Frames and events the relay tables are made of.
var (
	sseHead  = &pb.ExchangeHead{Status: 200, Headers: []*pb.HttpHeader{{Name: "Content-Type", Values: []string{"text/event-stream"}}}}
	jsonHead = &pb.ExchangeHead{Status: 200, Headers: []*pb.HttpHeader{{Name: "Content-Type", Values: []string{"application/json"}}}}
)

func frame(head *pb.ExchangeHead, data string, end bool, errText string) event {
	return event{kind: evFrame, frame: &pb.ExchangeFrame{Head: head, Data: []byte(data), End: end, Error: errText}}
}

func ev(k eventKind) event { return event{kind: k} }

// render turns actions into comparable lines.
func render(as []action) []string {
	var out []string
	for _, a := range as {
		switch a.kind {
		case actWriteHead:
			out = append(out, fmt.Sprintf("head %d", a.status))
		case actWrite:
			out = append(out, "write "+string(a.data))
		case actFlush:
			out = append(out, "flush")
		case actWriteLostStream:
			out = append(out, "lost-stream")
		case actWriteRestarting:
			out = append(out, "restarting")
		case actArmSilence:
			out = append(out, "arm-silence")
		case actArmGrace:
			out = append(out, "arm-grace")
		case actCancel:
			out = append(out, "cancel")
		case actLog:
			out = append(out, "log "+a.level.String())
		}
	}
	return out
}

// The relay's decisions, event by event: each row feeds its events to a
// fresh relay and compares every action it took, in order.
func TestRelayStep(t *testing.T) {
	id := json.RawMessage(`7`)
	tag := eventIDSuffix(id)
	restart := "write " + string(RestartingEvent(id))
	response := `event: message` + "\n" + `id: s_1` + "\n" + `data: {"jsonrpc":"2.0","id":7,"result":{}}` + "\n\n"
	taggedResponse := `event: message` + "\n" + `id: s_1` + tag + "\n" + `data: {"jsonrpc":"2.0","id":7,"result":{}}` + "\n\n"
	for _, tc := range []struct {
		name     string
		reqID    json.RawMessage
		resume   bool
		events   []event
		want     []string
		wantDone bool
	}{
		{name: "a quick JSON answer is written whole",
			reqID: id, events: []event{frame(jsonHead, `{"id":7,"result":{}}`, true, "")},
			want: []string{"head 200", `write {"id":7,"result":{}}`}, wantDone: true},
		{name: "an SSE stream is flushed frame by frame, its event ids tagged",
			reqID: id, events: []event{frame(sseHead, "id: s_0\ndata: \n\n", false, ""), frame(nil, response, true, "")},
			want: []string{"head 200", "write id: s_0" + tag + "\ndata: \n\n", "flush", "write " + taggedResponse}, wantDone: true},
		{name: "a stream without a request id is not tagged",
			events: []event{frame(sseHead, "id: s_0\n\n", true, "")},
			want:   []string{"head 200", "write id: s_0\n\n"}, wantDone: true},
		{name: "a stream broken before its response ends with the restart error for the request",
			reqID: id, events: []event{frame(sseHead, "id: s_0\n\n", false, ""), frame(nil, "", true, "handler panicked")},
			want: []string{"head 200", "write id: s_0" + tag + "\n\n", "flush", "log WARN", restart, "flush"}, wantDone: true},
		{name: "a handler cancelled by its runtime closing logs at info",
			reqID: id, events: []event{frame(sseHead, "", false, ""), frame(nil, "", true, "cancelled before the handler finished")},
			want: []string{"head 200", "flush", "log INFO", restart, "flush"}, wantDone: true},
		{name: "a stream broken after its response gets nothing more",
			reqID: id, events: []event{frame(sseHead, response, false, ""), frame(nil, "", true, "cancelled")},
			want: []string{"head 200", "write " + taggedResponse, "flush", "log INFO"}, wantDone: true},
		{name: "a notification's broken stream gets no error (nothing to answer)",
			events: []event{frame(sseHead, "", false, ""), frame(nil, "", true, "handler panicked")},
			want:   []string{"head 200", "flush", "log WARN"}, wantDone: true},
		{name: "a broken JSON response is not an event stream: nothing appended",
			reqID: id, events: []event{frame(jsonHead, "{", false, ""), frame(nil, "", true, "handler panicked")},
			want: []string{"head 200", "write {", "flush", "log WARN"}, wantDone: true},
		{name: "a failure before the head is the restart envelope",
			reqID: id, events: []event{frame(nil, "", true, "handler panicked")},
			want: []string{"log WARN", "restarting"}, wantDone: true},
		{name: "a resume failing before the head answers the lost stream",
			reqID: id, resume: true, events: []event{frame(nil, "", true, "handler panicked")},
			want: []string{"log WARN", "lost-stream"}, wantDone: true},
		{name: "a resume the new owner cannot replay (400) answers the lost stream",
			reqID: id, resume: true, events: []event{frame(&pb.ExchangeHead{Status: 400}, "Bad Request", true, "")},
			want: []string{"log INFO", "lost-stream"}, wantDone: true},
		{name: "a replay that ends without the response answers the request",
			reqID: id, resume: true, events: []event{frame(sseHead, "id: s_0\n\n", true, "")},
			want: []string{"head 200", "write id: s_0" + tag + "\n\n", restart, "flush"}, wantDone: true},
		{name: "a replay that carries the response ends normally",
			reqID: id, resume: true, events: []event{frame(sseHead, response, true, "")},
			want: []string{"head 200", "write " + taggedResponse}, wantDone: true},
		{name: "a line cut by the end is written untagged",
			reqID: id, events: []event{frame(sseHead, "id: s_0\n\nid: s_", true, "")},
			want: []string{"head 200", "write id: s_0" + tag + "\n\n", "write id: s_"}, wantDone: true},
		{name: "a departed node's exchange waits while frames come, then gives up when silent",
			reqID: id, events: []event{frame(sseHead, "", false, ""), ev(evDeparted), frame(nil, "data: x\n\n", false, ""), ev(evSilent)},
			want: []string{"head 200", "flush", "arm-silence", "arm-silence", "write data: x\n\n", "flush", "log INFO", restart, "flush"}, wantDone: true},
		{name: "a dead activation's end is awaited for a grace, once",
			reqID: id, events: []event{frame(sseHead, "", false, ""), ev(evGrainGone), ev(evGrainGone), ev(evGraceOver)},
			want: []string{"head 200", "flush", "arm-grace", restart, "flush"}, wantDone: true},
		{name: "a dead activation's end arriving in the grace ends the response normally",
			reqID: id, events: []event{frame(sseHead, "", false, ""), ev(evGrainGone), frame(nil, response, true, ""), ev(evGraceOver)},
			want: []string{"head 200", "flush", "arm-grace", "write " + taggedResponse}, wantDone: true},
		{name: "an activation dying before the head is the restart envelope",
			reqID: id, events: []event{ev(evGrainGone), ev(evGraceOver)},
			want: []string{"arm-grace", "restarting"}, wantDone: true},
		{name: "a departed node's silence before the head is the restart envelope",
			reqID: id, events: []event{ev(evDeparted), ev(evGrainGone), ev(evSilent)},
			want: []string{"arm-silence", "arm-silence", "arm-grace", "log INFO", "restarting"}, wantDone: true},
		{name: "a client going away cancels the handler and ends the exchange",
			reqID: id, events: []event{frame(sseHead, "", false, ""), ev(evClientGone), frame(nil, response, true, "")},
			want: []string{"head 200", "flush", "cancel"}, wantDone: true},
		{name: "a stream still going is not done",
			reqID: id, events: []event{frame(sseHead, "", false, ""), ev(evDeparted)},
			want: []string{"head 200", "flush", "arm-silence"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newRelay(tc.reqID, tc.resume)
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

func stepList(s *relay, e event) []action {
	acts := s.step(e)
	return acts.list()
}

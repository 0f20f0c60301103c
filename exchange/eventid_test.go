package exchange

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestEventIDTagRoundTrips(t *testing.T) {
	for _, id := range []string{`1`, `-3`, `2.5`, `"call-7"`, `"with ~ tilde and ünïcode"`, `""`} {
		suffix := eventIDSuffix(json.RawMessage(id))
		if suffix == "" {
			t.Fatalf("%s: not tagged", id)
		}
		base, got, ok := splitEventID("abc_3" + suffix)
		if !ok || base != "abc_3" || string(got) != id {
			t.Fatalf("%s: split %q %s %v", id, base, got, ok)
		}
	}
	for _, id := range []string{``, `null`, `"` + strings.Repeat("x", maxTaggedRequestID) + `"`} {
		if s := eventIDSuffix(json.RawMessage(id)); s != "" {
			t.Fatalf("%q tagged as %q", id, s)
		}
	}
}

// Untagged and hostile Last-Event-IDs are forwarded untouched: nothing
// but a JSON string or number is ever taken as a request id.
func TestSplitEventIDRejectsBadTags(t *testing.T) {
	for _, id := range []string{
		"", "abc_3", "~", "abc_3~", "abc_3~!!!", "~MQ",
		"abc_3~" + enc64(`{"a":1}`), "abc_3~" + enc64(`[1]`), "abc_3~" + enc64(`true`), "abc_3~" + enc64(`null`), "abc_3~" + enc64(`1 2`),
		"abc_3~" + enc64(`"`+strings.Repeat("x", 200)+`"`),
	} {
		if base, reqID, ok := splitEventID(id); ok || base != id || reqID != nil {
			t.Errorf("%q: split into %q %s %v", id, base, reqID, ok)
		}
	}
}

func enc64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestIDTaggerTagsIDLinesAcrossChunkSplits(t *testing.T) {
	stream := "event: prime\nid: s_0\ndata: \n\nevent: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"text\":\"id: not a field\"}}\n\n"
	want := strings.ReplaceAll(strings.ReplaceAll(stream, "id: s_0\n", "id: s_0~Nw\n"), "id: s_1\n", "id: s_1~Nw\n")
	for size := 1; size <= len(stream); size++ {
		tg := &idTagger{reqID: json.RawMessage("7")}
		var out []byte
		for i := 0; i < len(stream); i += size {
			out = append(out, tg.rewrite([]byte(stream[i:min(i+size, len(stream))]))...)
		}
		out = append(out, tg.rest()...)
		if string(out) != want {
			t.Fatalf("chunks of %d:\n%q\nwant\n%q", size, out, want)
		}
	}
	tg := &idTagger{reqID: json.RawMessage("7")}
	if got := string(tg.rewrite([]byte("id: a\r\ndata: x\r\n\r\n"))); got != "id: a~Nw\r\ndata: x\r\n\r\n" {
		t.Fatalf("CRLF: %q", got)
	}
	if got := string(tg.rewrite([]byte("data: cut"))) + string(tg.rest()); got != "data: cut" {
		t.Fatalf("unterminated line: %q", got)
	}
}

func TestRestartingEventAnswersTheRequest(t *testing.T) {
	ev := string(RestartingEvent(json.RawMessage(`"call-7"`)))
	data, ok := strings.CutPrefix(ev, "event: message\ndata: ")
	if !ok || !strings.HasSuffix(data, "\n\n") {
		t.Fatalf("event %q", ev)
	}
	var msg struct {
		ID    string `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil || msg.ID != "call-7" || msg.Error.Code != CodeServerError || !strings.Contains(msg.Error.Message, "restarting") {
		t.Fatalf("event data %q: %+v %v", data, msg, err)
	}
}

// maxTagAllocs bounds the objects of tagging a quick answer's frame (the
// priming event and the answer, two ids): its output. 2 before: the
// output had room for one tag and grew at the second.
const maxTagAllocs = 1

func TestIDTaggerAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	frame := []byte("id: s_0\ndata: \n\nevent: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"call-123\",\"result\":{}}\n\n")
	tg := &idTagger{reqID: json.RawMessage(`"call-123"`)}
	var out []byte
	allocs := testing.AllocsPerRun(100, func() { out = tg.rewrite(frame) })
	t.Logf("%.1f allocations per frame (%d bytes)", allocs, len(out))
	if strings.Count(string(out), eventIDTag) != 2 {
		t.Fatalf("frame %q", out)
	}
	if allocs > maxTagAllocs {
		t.Fatalf("%.1f allocations per frame, want ≤ %d", allocs, maxTagAllocs)
	}
}

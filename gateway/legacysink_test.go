package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// sinkOutput runs one response through an sseSink and returns the SSE
// stream it wrote.
func sinkOutput(t *testing.T, reqID string, status int, contentType string, writes ...string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	var id []byte
	if reqID != "" {
		id = []byte(reqID)
	}
	s := newSSESink(&sseOut{w: rec, rc: http.NewResponseController(rec)}, id)
	s.Header().Set("Content-Type", contentType)
	s.WriteHeader(status)
	for _, w := range writes {
		if _, err := s.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	s.finish()
	return rec.Body.String()
}

// A Streamable HTTP response becomes "message" events: SSE events split
// across writes are reassembled, the SDK's data-less priming event is
// dropped, a JSON body is one event, a 202 none.
func TestSSESinkTurnsResponsesIntoMessageEvents(t *testing.T) {
	got := sinkOutput(t, "1", 200, "text/event-stream",
		"id: a\ndata: \n\n", "id: b\ndata: {\"jsonrpc\":\"2.0\",", "\"method\":\"notifications/progress\"}\n\nid: c\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n")
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	if got != want {
		t.Fatalf("stream:\n%q\nwant\n%q", got, want)
	}
	if got := sinkOutput(t, "1", 200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`); got != "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" {
		t.Fatalf("json: %q", got)
	}
	if got := sinkOutput(t, "", 202, ""); got != "" {
		t.Fatalf("202: %q", got)
	}
}

// An error answer to a request becomes that request's JSON-RPC error (the
// gateway's own carry id null; the SDK's may be plain text); an error
// answer to a notification has nobody to go to.
func TestSSESinkAnswersErrorsToTheirRequest(t *testing.T) {
	got := sinkOutput(t, `"r7"`, 404, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`)
	if !strings.Contains(got, `"id":"r7"`) || !strings.Contains(got, `"code":-32001`) || !strings.Contains(got, "Session not found") {
		t.Fatalf("gateway error: %q", got)
	}
	got = sinkOutput(t, "3", 400, "text/plain", "Bad Request: invalid params\n")
	if !strings.Contains(got, `"id":3`) || !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "invalid params") {
		t.Fatalf("plain-text error: %q", got)
	}
	if got := sinkOutput(t, "", 400, "text/plain", "bad notification"); got != "" {
		t.Fatalf("notification's error: %q", got)
	}
}

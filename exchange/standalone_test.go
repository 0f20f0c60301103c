package exchange

import (
	"net/http"
	"net/http/httptest"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestStandaloneStreamRecognisesOnlyTheStandaloneGET(t *testing.T) {
	get := func(lastEventID ...string) *pb.HttpExchange {
		m := &pb.HttpExchange{Method: http.MethodGet}
		if len(lastEventID) > 0 {
			m.Headers = []*pb.HttpHeader{{Name: "Last-Event-Id", Values: lastEventID}}
		}
		return m
	}
	for _, tc := range []struct {
		name string
		m    *pb.HttpExchange
		want bool
	}{
		{"GET without Last-Event-ID", get(), true},
		{"go-sdk standalone id", get("_4"), true},
		{"our priming id", get("_dn9lu3zduitd.e"), true},
		{"a POST stream's id", get("AbC_3"), false},
		{"empty id", get(""), false},
		{"POST", &pb.HttpExchange{Method: http.MethodPost}, false},
		{"DELETE", &pb.HttpExchange{Method: http.MethodDelete}, false},
	} {
		if got := StandaloneStream(tc.m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	m := WithoutLastEventID(get("_4"))
	if len(m.GetHeaders()) != 0 {
		t.Errorf("withoutLastEventID kept %v", m.GetHeaders())
	}
}

func TestPrimingWriterPrimesOnlySuccessfulEventStreams(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		want        string
	}{
		{"event stream", http.StatusOK, "text/event-stream", "event: prime\nid: _x\ndata: \n\n: hi\n\n"},
		{"implicit 200", 0, "text/event-stream", "event: prime\nid: _x\ndata: \n\n: hi\n\n"},
		{"conflict", http.StatusConflict, "text/event-stream", ": hi\n\n"},
		{"plain text", http.StatusOK, "text/plain", ": hi\n\n"},
	} {
		rec := httptest.NewRecorder()
		w := &primingWriter{ResponseWriter: rec, id: "_x"}
		w.Header().Set("Content-Type", tc.contentType)
		if tc.status != 0 {
			w.WriteHeader(tc.status)
		}
		_, _ = w.Write([]byte(": hi\n\n"))
		w.Flush()
		_, _ = w.Write(nil)
		if got := rec.Body.String(); got != tc.want {
			t.Errorf("%s: wrote %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPrimeIDNamesTheStandaloneStream(t *testing.T) {
	a, b := PrimeID(1), PrimeID(2)
	if a == b {
		t.Errorf("PrimeID gave %q twice", a)
	}
	if m := (&pb.HttpExchange{Method: http.MethodGet, Headers: []*pb.HttpHeader{{Name: "Last-Event-ID", Values: []string{a}}}}); !StandaloneStream(m) {
		t.Errorf("a GET resuming from priming id %q is not the standalone stream", a)
	}
}

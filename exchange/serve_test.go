package exchange

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// frames spawns an actor that forwards every ExchangeFrame it gets.
func frames(t *testing.T) (*actor.ActorSystem, *actor.PID, <-chan *pb.ExchangeFrame) {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	got := make(chan *pb.ExchangeFrame, 16)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if f, ok := c.Message().(*pb.ExchangeFrame); ok {
			got <- f
		}
	}))
	return sys, pid, got
}

func next(t *testing.T, got <-chan *pb.ExchangeFrame) *pb.ExchangeFrame {
	t.Helper()
	select {
	case f := <-got:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame within 5s")
		return nil
	}
}

// A quick SSE answer (head + priming event, flush, result, flush, end)
// crosses as one frame.
func TestQuickAnswerIsOneFrame(t *testing.T) {
	sys, pid, got := frames(t)
	w := NewWriter(sys, pid, "x1")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("event: prime\n\n"))
	w.Flush()
	_, _ = w.Write([]byte("data: result\n\n"))
	w.Flush()
	w.End("")
	f := next(t, got)
	if f.GetHead().GetStatus() != 200 || string(f.GetData()) != "event: prime\n\ndata: result\n\n" || !f.GetEnd() {
		t.Fatalf("frame %v", f)
	}
	select {
	case extra := <-got:
		t.Fatalf("a second frame: %v", extra)
	case <-time.After(3 * coalesceWindow):
	}
}

// A flush with nothing after it still goes out (within the window), and
// the stream goes on.
func TestFlushWithoutMoreGoesOutAlone(t *testing.T) {
	sys, pid, got := frames(t)
	w := NewWriter(sys, pid, "x2")
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = w.Write([]byte(": open\n\n"))
	w.Flush()
	f := next(t, got)
	if f.GetHead().GetStatus() != 200 || string(f.GetData()) != ": open\n\n" || f.GetEnd() {
		t.Fatalf("first frame %v", f)
	}
	_, _ = w.Write([]byte("data: later\n\n"))
	w.Flush()
	f = next(t, got)
	if f.GetHead() != nil || string(f.GetData()) != "data: later\n\n" || f.GetEnd() {
		t.Fatalf("second frame %v", f)
	}
	w.End("")
	if f = next(t, got); !f.GetEnd() || len(f.GetData()) != 0 {
		t.Fatalf("end frame %v", f)
	}
}

// A full chunk goes out at once, without waiting for a flush.
func TestFullChunkGoesOutAtOnce(t *testing.T) {
	sys, pid, got := frames(t)
	w := NewWriter(sys, pid, "x3")
	big := make([]byte, maxChunk)
	_, _ = w.Write(big)
	if f := next(t, got); len(f.GetData()) != maxChunk || f.GetEnd() {
		t.Fatalf("chunk frame: %d bytes, end %v", len(f.GetData()), f.GetEnd())
	}
}

// exchangeTo is an exchange whose frames go to pid.
func exchangeTo(pid *actor.PID, id string, firstInReply bool) *pb.HttpExchange {
	return &pb.HttpExchange{ExchangeId: id, Method: http.MethodPost, Path: "/mcp", ReplyAddress: pid.GetAddress(), ReplyId: pid.GetId(), FirstFrameInReply: firstInReply}
}

// acks returns an Ack that hands what it is called with to the channel.
func acks() (Ack, <-chan *pb.ExchangeFrame) {
	ch := make(chan *pb.ExchangeFrame, 2)
	return func(first *pb.ExchangeFrame) { ch <- first }, ch
}

// A handler that answers at once has its whole response in the ack: no
// frame goes to the reply address.
func TestQuickAnswerTravelsWithTheAck(t *testing.T) {
	sys, pid, got := frames(t)
	ack, acked := acks()
	// A window far longer than the handler can take, even on a loaded
	// machine under the race detector: the frame must come with the ack.
	_, err := start(context.Background(), sys, pid, exchangeTo(pid, "a1", true), "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: result\n\n"))
		w.(http.Flusher).Flush()
	}, ack, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := next(t, acked)
	if f.GetHead().GetStatus() != 200 || string(f.GetData()) != "data: result\n\n" || !f.GetEnd() {
		t.Fatalf("acked frame %v", f)
	}
	select {
	case extra := <-got:
		t.Fatalf("a frame also went to the reply actor: %v", extra)
	case again := <-acked:
		t.Fatalf("acked twice: %v", again)
	case <-time.After(10 * coalesceWindow):
	}
}

// A handler that stays silent past the window is acknowledged alone; its
// frames then go to the reply address.
func TestSilentHandlerIsAckedAloneAfterTheWindow(t *testing.T) {
	sys, pid, got := frames(t)
	ack, acked := acks()
	release := make(chan struct{})
	_, err := Start(context.Background(), sys, pid, exchangeTo(pid, "a2", true), "", func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte(`{"late":true}`))
	}, ack)
	if err != nil {
		t.Fatal(err)
	}
	if f := next(t, acked); f != nil {
		t.Fatalf("acked with a frame before the handler wrote: %v", f)
	}
	close(release)
	f := next(t, got)
	if f.GetHead().GetStatus() != 200 || string(f.GetData()) != `{"late":true}` || !f.GetEnd() {
		t.Fatalf("frame %v", f)
	}
}

// A gateway that did not ask for the first frame in the reply (one that
// predates the field) is acknowledged at once, and gets every frame from
// the reply address.
func TestExchangeWithoutFirstFrameInReplyIsAckedAtOnce(t *testing.T) {
	sys, pid, got := frames(t)
	ack, acked := acks()
	_, err := Start(context.Background(), sys, pid, exchangeTo(pid, "a3", false), "", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}, ack)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-acked:
		if f != nil {
			t.Fatalf("acked with a frame: %v", f)
		}
	default:
		t.Fatal("Start returned before acknowledging")
	}
	if f := next(t, got); f.GetHead().GetStatus() != http.StatusAccepted || !f.GetEnd() {
		t.Fatalf("frame %v", f)
	}
}

// The writer's one timer serves both windows: a flushed head goes out
// with the ack when its coalescing window ends, long before the ack's
// own window, and later frames go to the reply address.
func TestFlushedHeadTakesTheAckBeforeItsWindow(t *testing.T) {
	sys, pid, got := frames(t)
	ack, acked := acks()
	release := make(chan struct{})
	_, err := start(context.Background(), sys, pid, exchangeTo(pid, "a4", true), "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("id: 1\ndata: \n\n"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("data: result\n\n"))
	}, ack, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := next(t, acked) // next gives up long before the hour
	if f.GetHead().GetStatus() != 200 || string(f.GetData()) != "id: 1\ndata: \n\n" || f.GetEnd() {
		t.Fatalf("acked frame %v", f)
	}
	close(release)
	if f := next(t, got); f.GetHead() != nil || string(f.GetData()) != "data: result\n\n" || !f.GetEnd() {
		t.Fatalf("frame %v", f)
	}
	select {
	case again := <-acked:
		t.Fatalf("acked twice: %v", again)
	case <-time.After(10 * coalesceWindow):
	}
}

// maxQuickAnswerAllocs bounds the objects of a quick SSE answer's writer
// (head and priming event, flush, result, flush, end; the answer taken by
// the ack): the writer, its header map and its table, its timer and the
// method value it calls, its buffer (made for the answer at the first
// Write) and the frame (its head in the same allocation, its data the
// buffer's): 8 measured. 14 before: the buffer grew twice, the data was
// copied, the frame, its head and its fields were five objects.
const maxQuickAnswerAllocs = 8

func TestQuickAnswerAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	ct, cc, conn := []string{"text/event-stream"}, []string{"no-cache, no-transform"}, []string{"keep-alive"}
	prime, result := []byte("id: 0\nevent: prime\n\n"), []byte("event: message\nid: 1\ndata: "+strings.Repeat("r", 200)+"\n\n")
	var got *pb.ExchangeFrame
	allocs := testing.AllocsPerRun(100, func() {
		w := NewWriter(nil, nil, "x1")
		w.ack = func(f *pb.ExchangeFrame) { got = f }
		h := w.Header()
		h["Content-Type"], h["Cache-Control"], h["Connection"] = ct, cc, conn
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(prime)
		w.Flush()
		_, _ = w.Write(result)
		w.Flush()
		w.End("")
	})
	t.Logf("%.1f allocations per quick answer", allocs)
	if string(got.GetData()) != string(prime)+string(result) || !got.GetEnd() || len(got.GetHead().GetHeaders()) != 3 {
		t.Fatalf("frame %v", got)
	}
	if allocs > maxQuickAnswerAllocs {
		t.Fatalf("%.1f allocations per quick answer, want ≤ %d", allocs, maxQuickAnswerAllocs)
	}
}

// maxStartWriterAllocs bounds the objects of Start's writer: the writer
// (its reply PID and its Done in it) and its header map. 4 before: the
// PID and the Done were objects of their own.
const maxStartWriterAllocs = 2

func TestStartWriterAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	var w *Writer
	allocs := testing.AllocsPerRun(100, func() { w = newWriterTo(nil, "gw:1", "replies", "x1") })
	t.Logf("%.1f allocations per writer", allocs)
	if w.to.GetAddress() != "gw:1" || w.to.GetId() != "replies" || w.done.ID != "x1" || w.id != "x1" {
		t.Fatalf("writer to %v, done %v", w.to, w.done)
	}
	if allocs > maxStartWriterAllocs {
		t.Fatalf("%.1f allocations per writer, want ≤ %d", allocs, maxStartWriterAllocs)
	}
}

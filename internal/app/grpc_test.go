package app

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// A client that connects to the gRPC port and never finishes its
// handshake is disconnected after the handshake timeout, not left holding
// a socket and a goroutine.
func TestGRPCDropsConnectionsThatNeverHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpcLimitsWith(200 * time.Millisecond)...)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf) // the server's settings frame, then the close
		if errors.Is(err, io.EOF) {
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the silent connection was still open after 10s")
		}
		if err != nil {
			return // reset: closed as well
		}
	}
}

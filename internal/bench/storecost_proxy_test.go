package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// wireCounts are what a wireProxy saw: bytes each way and the frontend
// messages that end a round trip (Sync of the extended protocol, Query of
// the simple one).
type wireCounts struct {
	Sent, Received, RoundTrips int64
}

func (c wireCounts) sub(o wireCounts) wireCounts {
	return wireCounts{Sent: c.Sent - o.Sent, Received: c.Received - o.Received, RoundTrips: c.RoundTrips - o.RoundTrips}
}

// wireProxy forwards TCP connections to a Postgres server and counts the
// node's traffic: the bytes the node sends and receives, and its round
// trips (read from the frontend message types). It is a measuring tap, not
// a fake: the server behind it is real.
type wireProxy struct {
	ln       net.Listener
	upstream string
	sent     atomic.Int64
	received atomic.Int64
	trips    atomic.Int64
	wg       sync.WaitGroup
}

// newWireProxy listens on a loopback port and forwards to upstream.
func newWireProxy(upstream string) (*wireProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	p := &wireProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *wireProxy) addr() string { return p.ln.Addr().String() }

func (p *wireProxy) counts() wireCounts {
	return wireCounts{Sent: p.sent.Load(), Received: p.received.Load(), RoundTrips: p.trips.Load()}
}

func (p *wireProxy) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *wireProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

// serve forwards one connection until either side closes it.
func (p *wireProxy) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() {
		_ = p.frontend(u, c)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(counting{c, &p.received}, u)
		done <- struct{}{}
	}()
	<-done
}

// counting is a writer that adds what it writes to n as it goes (it also
// hides the ReaderFrom of a net.Conn, so io.Copy writes through it).
type counting struct {
	w io.Writer
	n *atomic.Int64
}

func (w counting) Write(b []byte) (int, error) {
	m, err := w.w.Write(b)
	w.n.Add(int64(m))
	return m, err
}

// frontend copies the client's messages to the server one by one: the
// untyped start-up messages (SSLRequest, StartupMessage: length first),
// then typed ones (a type byte, then the length).
func (p *wireProxy) frontend(dst io.Writer, src io.Reader) error {
	r := bufio.NewReader(src)
	started := false
	hdr := make([]byte, 5)
	for {
		h := hdr[:4]
		if started {
			h = hdr[:5]
		}
		if _, err := io.ReadFull(r, h); err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(h[len(h)-4:]))
		if n < 4 {
			return errors.New("proxy: bad message length")
		}
		if !started {
			code := make([]byte, 4)
			if _, err := io.ReadFull(r, code); err != nil {
				return err
			}
			// 196608 is protocol 3.0: the StartupMessage; anything else
			// (SSLRequest, GSSENCRequest, CancelRequest) precedes it.
			started = binary.BigEndian.Uint32(code) == 196608
			h = append(h, code...)
			n -= 4
		} else if h[0] == 'S' || h[0] == 'Q' {
			p.trips.Add(1)
		}
		if _, err := dst.Write(h); err != nil {
			return err
		}
		m, err := io.CopyN(dst, r, n-4)
		p.sent.Add(int64(len(h)) + m)
		if err != nil {
			return err
		}
	}
}

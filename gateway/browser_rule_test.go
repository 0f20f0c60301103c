package gateway

import (
	"net"
	"testing"
)

// TestReboundHost is the DNS-rebinding decision: a loopback listener
// answers only to loopback names; other listeners to any.
func TestReboundHost(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	v6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	cases := []struct {
		name  string
		local net.Addr
		host  string
		want  bool
	}{
		{"loopback listener, its own address", v4, "127.0.0.1:8080", false},
		{"loopback listener, localhost", v4, "localhost:8080", false},
		{"loopback listener, localhost without port", v4, "localhost", false},
		{"loopback listener, another loopback address", v4, "127.0.0.2:8080", false},
		{"loopback listener, IPv6 loopback", v4, "[::1]:8080", false},
		{"IPv6 loopback listener, its own address", v6, "[::1]:8080", false},
		{"loopback listener, a rebound name", v4, "evil.example:8080", true},
		{"loopback listener, a rebound name without port", v4, "evil.example", true},
		{"loopback listener, a name ending in localhost", v4, "evil.localhost.example:8080", true},
		{"loopback listener, a LAN address", v4, "10.0.0.5:8080", true},
		{"loopback listener, no Host", v4, "", true},
		{"IPv6 loopback listener, a rebound name", v6, "evil.example:8080", true},
		{"LAN listener, any name", lan, "mcp.example.com", false},
		{"LAN listener, no Host", lan, "", false},
		{"unknown listener", nil, "evil.example", false},
		{"a listener that is not TCP (its address text is read)", &net.UnixAddr{Name: "/run/mcp.sock", Net: "unix"}, "evil.example", false},
		{"a listener that is not TCP, named loopback", fakeAddr("127.0.0.1:8080"), "evil.example", true},
	}
	for _, c := range cases {
		if got := reboundHost(c.local, c.host); got != c.want {
			t.Errorf("%s: reboundHost(%v, %q) = %v, want %v", c.name, c.local, c.host, got, c.want)
		}
	}
}

// fakeAddr is a net.Addr of another type than the listeners' usual
// *net.TCPAddr, to reach reboundHost's text path.
type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }

package mcpupstream

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"
)

func TestUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "x"}}
	wrapped := func(err error) error {
		return fmt.Errorf("connect: calling \"initialize\": %w", &url.Error{Op: "Post", URL: "http://x", Err: err})
	}
	cases := []struct {
		name   string
		status int
		err    error
		want   bool
	}{
		{"401", 401, errors.New("Unauthorized"), false},
		{"403", 403, errors.New("Forbidden"), false},
		{"404", 404, errors.New("Not Found"), false},
		{"400", 400, errors.New("Bad Request"), false},
		{"405", 405, errors.New("Method Not Allowed"), false},
		{"408", 408, errors.New("Request Timeout"), true},
		{"429", 429, errors.New("Too Many Requests"), true},
		{"500", 500, errors.New("Internal Server Error"), true},
		{"502", 502, errors.New("Bad Gateway"), true},
		{"503", 503, errors.New("Service Unavailable"), true},
		{"connection refused", 0, wrapped(syscall.ECONNREFUSED), true},
		{"connection reset", 0, wrapped(syscall.ECONNRESET), true},
		{"dial error", 0, wrapped(refused), true},
		{"our attempt timed out", 0, fmt.Errorf("connect: %w", context.DeadlineExceeded), true},
		{"closed mid-answer", 0, wrapped(io.ErrUnexpectedEOF), true},
		{"unknown host", 0, wrapped(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}}), false},
		{"resolver failing", 0, wrapped(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", Name: "up.internal", IsTemporary: true}}), true},
		{"untrusted certificate", 0, wrapped(x509.UnknownAuthorityError{}), false},
		{"wrong host in certificate", 0, wrapped(x509.HostnameError{Host: "x"}), false},
		{"not an MCP answer", 0, errors.New(`sending "server/discover": unsupported content type "text/html"`), false},
	}
	for _, tc := range cases {
		if got := unavailable(tc.status, tc.err); got != tc.want {
			t.Errorf("%s: unavailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNextRetryDoublesUpToTheLimit(t *testing.T) {
	wait := time.Second
	var got []time.Duration
	for range 7 {
		wait = nextRetry(wait, 30*time.Second)
		got = append(got, wait)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

package mcpupstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrUnavailable is wrapped by the error a source that has not connected
// yet gives for its tools (see Source.Unavailable). Test with errors.Is.
var ErrUnavailable = errors.New("upstream MCP server not connected")

// ConnectError is the error of a failed attempt to connect to the upstream
// and list its tools.
type ConnectError struct {
	// Source is the source name.
	Source string
	// Status is the HTTP status the upstream refused a request with, or 0
	// when it gave none (no answer, or an answer that was not MCP).
	Status int
	// Unavailable reports that the upstream is down or overloaded rather
	// than refusing or misunderstanding the request: no answer (connection
	// refused or reset, a timeout, a name that failed to resolve for now)
	// or HTTP 5xx or 429. Retrying may help; otherwise the configuration
	// (URL, headers, TLS) needs a fix.
	Unavailable bool
	// Err is the underlying error.
	Err error
}

// Error names the source, what the failure means, and the underlying error.
func (e *ConnectError) Error() string {
	return fmt.Sprintf("mcpupstream %s: %s: %v", e.Source, e.meaning(), e.Err)
}

// Unwrap returns the underlying error.
func (e *ConnectError) Unwrap() error { return e.Err }

func (e *ConnectError) meaning() string {
	code := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	switch {
	case e.Status == http.StatusUnauthorized:
		return "the upstream answered " + code + ": it refused the credentials sent (check the source's headers)"
	case e.Status == http.StatusForbidden:
		return "the upstream answered " + code + ": the credentials sent may not use it (check the source's headers)"
	case e.Status == http.StatusNotFound:
		return "the upstream answered " + code + ": is the URL its MCP endpoint (often …/mcp)?"
	case e.Status != 0 && e.Unavailable:
		return "the upstream answered " + code + " (down or overloaded)"
	case e.Status != 0:
		return "the upstream refused the request with " + code
	case e.Unavailable:
		return "the upstream is unreachable"
	}
	return "cannot connect to the upstream"
}

// unavailable reports whether a failed attempt that got HTTP status (0:
// none) and ended with err means the upstream is down for now rather than
// misconfigured. It is a pure function of its arguments.
func unavailable(status int, err error) bool {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500:
		return true
	case status >= 400:
		return false // credentials, path, method, content: a configuration to fix
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return !dns.IsNotFound // an unknown host is a typo; a failing resolver is not
	}
	if badCertificate(err) {
		return false
	}
	var op *net.OpError
	var ne net.Error
	return errors.As(err, &op) || (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// badCertificate reports a TLS failure that retrying cannot fix: a
// certificate the client does not trust, or TLS spoken to a plain port.
func badCertificate(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}

// statusKey is the context key of the *atomic.Int32 a connection attempt's
// requests note an HTTP error status in.
type statusKey struct{}

// noteStatus records an HTTP error status for the attempt ctx belongs to.
func noteStatus(ctx context.Context, status int) {
	if p, ok := ctx.Value(statusKey{}).(*atomic.Int32); ok {
		p.Store(int32(status))
	}
}

// connect makes one attempt, within ConnectTimeout, to connect and list the
// tools; a failure is a *ConnectError.
func (s *Source) connect(ctx context.Context) (*snapshot, error) {
	status := new(atomic.Int32)
	actx, cancel := context.WithTimeout(context.WithValue(ctx, statusKey{}, status), s.opts.ConnectTimeout)
	defer cancel()
	snap, err := s.fetch(actx)
	if err == nil {
		return snap, nil
	}
	code := int(status.Load())
	// The caller's own end (a node stopping) is not the upstream's fault.
	down := ctx.Err() == nil && unavailable(code, err)
	return nil, &ConnectError{Source: s.name, Status: code, Unavailable: down, Err: err}
}

// Unavailable returns why the source has no tools yet while it connects in
// the background: an error wrapping ErrUnavailable that says what the last
// attempt met (not its URL or error text, which the log has: the error is
// shown to code). Nil once it has connected, and for a source that
// connected in New. It implements tools.Availability.
func (s *Source) Unavailable() error {
	ce := s.unavailable.Load()
	if ce == nil {
		return nil
	}
	return fmt.Errorf("%w: %s; it is retried in the background", ErrUnavailable, ce.meaning())
}

// armRetry schedules the next background attempt after wait.
func (s *Source) armRetry(wait time.Duration) {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if s.closed.Load() {
		return
	}
	s.retry = s.opts.Clock.AfterFunc(wait, func() { s.attempt(wait) })
}

// attempt is one background attempt to connect; after a failure it arms
// the next, waiting nextRetry(waited).
func (s *Source) attempt(waited time.Duration) {
	if s.closed.Load() {
		return
	}
	snap, err := s.connect(s.life)
	if s.closed.Load() {
		return
	}
	if err == nil {
		s.store(snap)
		s.unavailable.Store(nil)
		s.log.Info("upstream MCP server connected", "source", s.name, "tools", len(snap.list))
		s.notifyWatchers()
		return
	}
	var ce *ConnectError
	if !errors.As(err, &ce) {
		ce = &ConnectError{Source: s.name, Err: err}
	}
	s.unavailable.Store(ce)
	next := nextRetry(waited, s.opts.RetryMax)
	if ce.Unavailable {
		s.log.Warn("upstream MCP server still unavailable", "source", s.name, "retry_in", next, "error", ce)
	} else {
		// It answers now, but refuses: keep trying (its configuration may
		// be fixed on its side) and say so louder.
		s.log.Error("upstream MCP server refuses the connection", "source", s.name, "retry_in", next, "error", ce)
	}
	s.armRetry(next)
}

// nextRetry is the wait after a failed attempt that followed a wait of
// waited: double it, at most limit.
func nextRetry(waited, limit time.Duration) time.Duration {
	return min(2*waited, limit)
}

package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time         { return c.t }
func (c *fakeClock) add(d time.Duration)    { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock              { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func (c *fakeClock) opts() func() time.Time { return c.now }

func TestFailureLimiterBlocksAnAddressOutOfFailures(t *testing.T) {
	clk := newFakeClock()
	f := NewFailureLimiter(FailureLimiterOptions{Rate: 0.5, Burst: 3, Now: clk.opts()})
	for i := range 3 {
		if _, blocked := f.Blocked("a"); blocked {
			t.Fatalf("blocked before failure %d", i+1)
		}
		f.Failed("a")
	}
	retry, blocked := f.Blocked("a")
	if !blocked || retry <= 0 || retry > 2*time.Second {
		t.Fatalf("after 3 failures: blocked %v, retry %s; want blocked for at most 2s", blocked, retry)
	}
	if _, blocked := f.Blocked("b"); blocked {
		t.Fatal("another address is blocked too")
	}
	clk.add(retry)
	if _, blocked := f.Blocked("a"); blocked {
		t.Fatalf("still blocked after Retry-After (%s)", retry)
	}
	f.Failed("a") // the earned token goes at once
	if _, blocked := f.Blocked("a"); !blocked {
		t.Fatal("not blocked after spending the earned failure")
	}
}

func TestFailureLimiterRemembersABoundedNumberOfAddresses(t *testing.T) {
	f := NewFailureLimiter(FailureLimiterOptions{Rate: 0.001, Burst: 1, MaxClients: 100})
	for i := range 10000 {
		f.Failed(ClientKey(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256)))
	}
	if n := f.Len(); n != 100 {
		t.Fatalf("%d addresses remembered, want 100", n)
	}
	if _, blocked := f.Blocked("10.0.39.15"); !blocked { // the last one
		t.Fatal("the most recent address was forgotten")
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:443":              "192.0.2.1",
		"[::ffff:192.0.2.1]:443":     "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2::9]:1":        "2001:db8:1:2::/64",
		"pipe":                       "pipe",
	} {
		if got := ClientKey(in); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// An address out of failed sign-ins is refused with 429 before its
// credentials are looked at — a valid token too — until it earned one
// back; requests without credentials are not failures; other addresses
// are unaffected.
func TestAuthenticatorLimitsFailedSignInsPerAddress(t *testing.T) {
	keys, err := NewKeys(Entry{Token: "mcpg_valid_token_0123456789", User: "u", Org: "o"})
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	a := NewAuthenticator(keys, AuthOptions{Failures: NewFailureLimiter(FailureLimiterOptions{Rate: 0.1, Burst: 2, Now: clk.opts()})})
	req := func(addr, authz string) error {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = addr
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		_, err := a.Authenticate(r)
		return err
	}
	code := func(err error) string {
		var ae *Error
		if err == nil {
			return "ok"
		}
		if !errors.As(err, &ae) {
			return err.Error()
		}
		if ae.Code == "" {
			return "401"
		}
		return ae.Code
	}
	for range 5 {
		if got := code(req("192.0.2.1:1", "")); got != "401" {
			t.Fatalf("no credentials: %s", got)
		}
	}
	if got := code(req("192.0.2.1:1", "Bearer mcpg_wrong_token_0123456789")); got != CodeInvalidToken {
		t.Fatalf("first wrong token: %s", got)
	}
	if _, err := a.AuthenticateToken(t.Context(), "192.0.2.1:2", "bad token!"); code(err) != CodeInvalidRequest {
		t.Fatalf("second, malformed: %s", code(err))
	}
	err = req("192.0.2.1:3", "Bearer mcpg_valid_token_0123456789")
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeRateLimited || ae.Status != 429 || ae.RetryAfter <= 0 || ae.RetryAfter > 10*time.Second {
		t.Fatalf("a valid token from a blocked address: %v, want 429 rate_limited with Retry-After <= 10s", err)
	}
	if _, err := a.AuthenticateHeader(t.Context(), "192.0.2.1:4", []string{"Bearer mcpg_valid_token_0123456789"}); code(err) != CodeRateLimited {
		t.Fatalf("gRPC metadata from the blocked address: %s", code(err))
	}
	if got := code(req("198.51.100.7:1", "Bearer mcpg_valid_token_0123456789")); got != "ok" {
		t.Fatalf("another address: %s", got)
	}
	clk.add(ae.RetryAfter)
	if got := code(req("192.0.2.1:5", "Bearer mcpg_valid_token_0123456789")); got != "ok" {
		t.Fatalf("after Retry-After: %s", got)
	}
}

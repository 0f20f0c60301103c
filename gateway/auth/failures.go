package auth

import (
	"math"
	"net"
	"net/netip"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// Defaults of [FailureLimiterOptions].
const (
	// DefaultFailureRate is the failed sign-ins per second a client
	// address earns back: one every 5 s.
	DefaultFailureRate = 0.2
	// DefaultFailureBurst is how many failed sign-ins a client address may
	// make in a row.
	DefaultFailureBurst = 20
	// DefaultFailureClients bounds the client addresses remembered.
	DefaultFailureClients = 10000
)

// FailureLimiterOptions configure a [FailureLimiter]. The zero value is
// the defaults.
type FailureLimiterOptions struct {
	// Rate is the failed sign-ins per second a client address earns back.
	// Default (0 or less) [DefaultFailureRate].
	Rate float64
	// Burst is how many failed sign-ins a client address may make before
	// it is refused. Default (0 or less) [DefaultFailureBurst].
	Burst int
	// MaxClients bounds memory: beyond this many addresses the least
	// recently seen are forgotten (and start again with a full budget).
	// Default (0 or less) [DefaultFailureClients].
	MaxClients int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// FailureLimiter limits failed sign-ins per client address: each address
// has a token bucket of Burst failures refilled at Rate per second. Only
// failures take from it; once it is empty, every attempt from the address
// that carries credentials is refused before the credentials are looked
// at — a valid token included, so a guesser learns nothing from a refused
// attempt — until the bucket has a token again.
//
// Keyed by address only. A key per token prefix would not slow a guesser
// (every guess has its own prefix), and keyed on a real token's prefix it
// would let anyone lock that token's owner out. Behind a reverse proxy
// every client has the proxy's address (X-Forwarded-For is not trusted:
// a client can write it); raise the burst there, or turn the limiter off
// and limit at the proxy.
//
// A FailureLimiter is safe for concurrent use.
type FailureLimiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time
	addrs *lru.Cache[string, *rate.Limiter]
}

// NewFailureLimiter returns a FailureLimiter configured by o.
func NewFailureLimiter(o FailureLimiterOptions) *FailureLimiter {
	if !(o.Rate > 0) {
		o.Rate = DefaultFailureRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultFailureBurst
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultFailureClients
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	addrs, _ := lru.New[string, *rate.Limiter](o.MaxClients) // only errors for a size <= 0
	return &FailureLimiter{rate: rate.Limit(o.Rate), burst: o.Burst, now: o.Now, addrs: addrs}
}

// Blocked reports whether client (a [ClientKey]) has no failed sign-in
// left, and if so how long until it has one. It takes nothing.
func (f *FailureLimiter) Blocked(client string) (retryAfter time.Duration, blocked bool) {
	lim, ok := f.addrs.Get(client)
	if !ok {
		return 0, false
	}
	tokens := lim.TokensAt(f.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration(math.Ceil((1 - tokens) / float64(f.rate) * float64(time.Second))), true
}

// Failed records a failed sign-in by client (a [ClientKey]).
func (f *FailureLimiter) Failed(client string) {
	lim, ok := f.addrs.Get(client)
	if !ok {
		lim = rate.NewLimiter(f.rate, f.burst)
		if prev, found, _ := f.addrs.PeekOrAdd(client, lim); found {
			lim = prev
		}
	}
	lim.AllowN(f.now(), 1)
}

// Len returns the number of client addresses remembered.
func (f *FailureLimiter) Len() int { return f.addrs.Len() }

// ClientKey is the address failed sign-ins are counted under, from a
// connection's remote address ("host:port", as http.Request.RemoteAddr):
// the IP, IPv6 addresses by their /64 (one host usually has a whole /64).
// An address that does not parse is its own key.
func ClientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

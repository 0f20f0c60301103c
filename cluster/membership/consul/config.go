package consul

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Defaults applied by [New] to zero fields of [Config].
const (
	// DefaultAddress is the agent HTTP API used when Config.Address is empty.
	DefaultAddress = "127.0.0.1:8500"
	// DefaultTTL is the liveness lease used when Config.TTL is zero.
	DefaultTTL = 3 * time.Second
	// DefaultDeregisterCriticalAfter is used when
	// Config.DeregisterCriticalAfter is zero.
	DefaultDeregisterCriticalAfter = time.Minute
	// DefaultWatchWait is the blocking-query wait used when
	// Config.WatchWait is zero. It is also the longest a member change can
	// go unseen when Consul fails to wake a blocking query for it: CI saw a
	// node's watch sleep through another node's registration for its whole
	// 30 s wait (Consul v1.14.11, dev agent; the index of the same query
	// later went backwards), so the wait is a few TTLs, not Consul's usual
	// minutes. A node idle in a quiet cluster asks Consul once per wait.
	DefaultWatchWait = 5 * time.Second
)

// maxWatchWait is the longest wait Consul honours for a blocking query.
const maxWatchWait = 10 * time.Minute

// Config configures a [Provider]. Every zero value means the documented
// default; only ClusterName is required.
type Config struct {
	// Address is the host:port of the Consul agent's HTTP API (a
	// "http://" or "https://" prefix is accepted). Default
	// [DefaultAddress]. Other client settings — ACL token, TLS files — come
	// from the standard CONSUL_HTTP_TOKEN, CONSUL_CACERT, ... environment
	// variables, as for the consul CLI.
	Address string
	// ClusterName is the Consul service name every member registers under;
	// members with the same ClusterName form one cluster. Required; it must
	// not contain '/'.
	ClusterName string
	// TTL is the liveness lease: the member's TTL check turns critical, and
	// the other members drop it, when it has not been passed for TTL.
	// Default [DefaultTTL].
	TTL time.Duration
	// RefreshInterval is how often the TTL check is passed. It must be
	// shorter than TTL. Default TTL/3.
	RefreshInterval time.Duration
	// DeregisterCriticalAfter is how long the check may stay critical before
	// the agent removes the registration altogether. Consul raises values
	// under one minute to one minute and reaps every 30 s, so this is a
	// garbage collector, not a failure detector. Default
	// [DefaultDeregisterCriticalAfter].
	DeregisterCriticalAfter time.Duration
	// WatchWait bounds one blocking query on the member list (Consul adds up
	// to 1/16 of jitter; the maximum is 10 minutes). Default
	// [DefaultWatchWait].
	WatchWait time.Duration
	// RemovalHoldDown is how long, after a discontinuity in what Consul
	// reports (a watch error streak ended, or the index went backwards, as
	// after an agent restart), a member missing from Consul's answer is
	// still published: it is most likely re-registering. Without a
	// discontinuity missing members are removed at once. Default 2×TTL.
	RemovalHoldDown time.Duration
	// Logger receives the provider's logs. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time; it measures the liveness lease (for
	// self-suspicion) and the removal hold-down. Default time.Now. Tests
	// set it to make time jump, as for a process frozen by SIGSTOP.
	Now func() time.Time
}

// withDefaults returns c with zero fields defaulted, or an error naming the
// first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.ClusterName == "" {
		return c, errors.New("consul membership: Config.ClusterName is required (the Consul service name shared by all members)")
	}
	if strings.Contains(c.ClusterName, "/") {
		return c, fmt.Errorf("consul membership: Config.ClusterName %q must not contain '/'", c.ClusterName)
	}
	for name, d := range map[string]time.Duration{
		"TTL": c.TTL, "RefreshInterval": c.RefreshInterval, "DeregisterCriticalAfter": c.DeregisterCriticalAfter,
		"WatchWait": c.WatchWait, "RemovalHoldDown": c.RemovalHoldDown,
	} {
		if d < 0 {
			return c, fmt.Errorf("consul membership: Config.%s must not be negative (got %s; zero means the default)", name, d)
		}
	}
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = c.TTL / 3
	}
	if c.RefreshInterval >= c.TTL {
		return c, fmt.Errorf("consul membership: Config.RefreshInterval (%s) must be shorter than TTL (%s)", c.RefreshInterval, c.TTL)
	}
	if c.DeregisterCriticalAfter == 0 {
		c.DeregisterCriticalAfter = DefaultDeregisterCriticalAfter
	}
	if c.WatchWait == 0 {
		c.WatchWait = DefaultWatchWait
	}
	if c.WatchWait > maxWatchWait {
		return c, fmt.Errorf("consul membership: Config.WatchWait (%s) exceeds Consul's maximum of %s", c.WatchWait, maxWatchWait)
	}
	if c.RemovalHoldDown == 0 {
		c.RemovalHoldDown = 2 * c.TTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// requestTimeout bounds one non-blocking request to the agent: a reply that
// takes longer than the lease is useless anyway.
func (c Config) requestTimeout() time.Duration {
	return min(max(c.TTL, time.Second), 10*time.Second)
}

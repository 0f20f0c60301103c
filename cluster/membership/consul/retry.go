package consul

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// Retry pacing.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// minQueryGap spaces blocking queries whose index did not change, so an
	// agent that answers at once cannot make the watch spin.
	minQueryGap = 100 * time.Millisecond
	// minChangedQueryGap spaces every blocking query, even when the index
	// moved.
	minChangedQueryGap = 10 * time.Millisecond
	// failureLogEvery bounds how often a failure streak is logged again.
	failureLogEvery = 10 * time.Second
)

// backoffDelay returns the delay before retry number attempt (0-based):
// base·2^attempt capped at maxDelay, with "equal jitter" — a uniformly random
// point in the upper half, chosen by r in [0, 1).
func backoffDelay(attempt int, base, maxDelay time.Duration, r float64) time.Duration {
	d := base
	for i := 0; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}

// backoff is the retry state of one loop.
type backoff struct {
	base, max time.Duration
	attempt   int
}

// next returns the delay before the next retry and advances.
func (b *backoff) next() time.Duration {
	d := backoffDelay(b.attempt, b.base, b.max, rand.Float64())
	b.attempt++
	return d
}

func (b *backoff) reset() { b.attempt = 0 }

// failureLog logs a failure streak at WARN once when it starts, then at most
// every failureLogEvery, and at INFO when it ends.
type failureLog struct {
	log   *slog.Logger
	what  string // e.g. "consul watch"
	attrs []any

	failing bool
	since   time.Time
	last    time.Time
	n       int
}

func (f *failureLog) fail(err error) {
	now := time.Now()
	f.n++
	switch {
	case !f.failing:
		f.failing, f.since, f.last = true, now, now
		f.log.Warn(f.what+" failed; retrying with backoff", append([]any{"err", err}, f.attrs...)...)
	case now.Sub(f.last) >= failureLogEvery:
		f.last = now
		f.log.Warn(f.what+" still failing", append([]any{"err", err, "attempts", f.n, "for", now.Sub(f.since).Round(time.Millisecond)}, f.attrs...)...)
	}
}

// ok ends a streak; it reports whether one was running.
func (f *failureLog) ok() bool {
	if !f.failing {
		return false
	}
	f.log.Info(f.what+" recovered", append([]any{"attempts", f.n, "after", time.Since(f.since).Round(time.Millisecond)}, f.attrs...)...)
	f.failing, f.n = false, 0
	return true
}

// sleep waits for d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// holdDown tracks the removal hold-down window opened by discontinuities.
type holdDown struct {
	period time.Duration
	until  time.Time
}

// open starts (or extends) the window at now.
func (h *holdDown) open(now time.Time) {
	if u := now.Add(h.period); u.After(h.until) {
		h.until = u
	}
}

// remaining is how long the window stays open after now (0 when closed).
func (h *holdDown) remaining(now time.Time) time.Duration {
	return max(h.until.Sub(now), 0)
}

// mergeHeld returns the view to publish given the last published view and
// Consul's fresh answer. Outside a hold-down (holding false) it is fresh.
// During one, members of published missing from fresh are kept as they were
// (held); members in fresh are taken from fresh, so new and changed members
// appear at once.
func mergeHeld(published, fresh membership.View, holding bool) (v membership.View, held []string) {
	if !holding {
		return fresh, nil
	}
	ms := slices.Clone(fresh.Members)
	for _, m := range published.Members {
		if !fresh.Contains(m.ID) {
			ms = append(ms, m)
			held = append(held, m.ID)
		}
	}
	if held == nil {
		return fresh, nil
	}
	return membership.NewView(ms...), held
}

package handle

import "time"

// Expiry decides about a handle's expiry reminder, fired at now: a handle
// last used at used is deleted once idle for ttl (delete), and otherwise
// the reminder is due again when it will have been (next).
func Expiry(used time.Time, ttl time.Duration, now time.Time) (del bool, next time.Time) {
	end := used.Add(ttl)
	if !now.Before(end) {
		return true, time.Time{}
	}
	return false, end
}

// touchDue reports whether an open at now should record the use of a
// handle last used at used: at most once per ttl/touchSteps, so reading a
// handle costs a write only rarely while its expiry still counts from a
// recent use (within ttl/touchSteps).
func touchDue(used time.Time, ttl time.Duration, now time.Time) bool {
	return now.Sub(used) >= ttl/touchSteps
}

// touchSteps: an open records the use when the last one recorded is
// older than a thirtieth of the idle TTL (a day for 30 days).
const touchSteps = 30

package store

import "time"

// SetClock makes s, an SQL store, stamp what it writes with now's time:
// contract tests order stored events in time without waiting for the
// clock.
func SetClock(s Store, now func() time.Time) { s.(*sqlStore).now = now }

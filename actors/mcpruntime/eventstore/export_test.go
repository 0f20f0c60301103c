package eventstore

import "time"

// SetClock makes s stamp the events it stores with now's time: contract
// tests order stored events in time without waiting for the clock.
func SetClock(s *Store, now func() time.Time) { s.now = now }

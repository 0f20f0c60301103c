package clock

import (
	"testing"
	"time"
)

func TestFakeRunsDueTimersInOrderAtTheirTime(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var got []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(time.Second, rec("a"))
	stopped := c.AfterFunc(2*time.Second, rec("x"))
	c.AfterFunc(2*time.Second, func() {
		rec("b")()
		c.AfterFunc(0, rec("b-child")) // due now: runs in the same Advance
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	c.Advance(2500 * time.Millisecond)
	want := []string{"a", "b", "b-child"}
	if len(got) != len(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ran %v, want %v", got, want)
		}
	}
	if at[0] != time.Second || at[1] != 2*time.Second || at[2] != 2*time.Second {
		t.Fatalf("timers saw times %v", at)
	}
	if c.Now().Sub(start) != 2500*time.Millisecond || c.Pending() != 1 {
		t.Fatalf("now %v pending %d", c.Now().Sub(start), c.Pending())
	}
	c.Advance(time.Second)
	if len(got) != 4 || got[3] != "c" {
		t.Fatalf("ran %v", got)
	}
}

func TestFakePendingAtCountsTimersDueThen(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	c.AfterFunc(time.Second, func() {})
	c.AfterFunc(time.Second, func() {})
	stopped := c.AfterFunc(time.Second, func() {})
	c.AfterFunc(2*time.Second, func() {})
	stopped.Stop()
	if n := c.PendingAt(start.Add(time.Second)); n != 2 {
		t.Fatalf("PendingAt(+1s) = %d, want 2", n)
	}
	if n := c.PendingAt(start.Add(3 * time.Second)); n != 0 {
		t.Fatalf("PendingAt(+3s) = %d, want 0", n)
	}
	c.Advance(time.Second)
	if n := c.PendingAt(start.Add(time.Second)); n != 0 {
		t.Fatalf("PendingAt(+1s) after it ran = %d, want 0", n)
	}
}

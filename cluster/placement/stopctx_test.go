package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStopCtxForgetsEndedChildrenAndCancelsLiveOnes(t *testing.T) {
	c := newStopCtx()
	for range 3 {
		child, cancel := context.WithTimeout(c, time.Hour)
		if child.Err() != nil {
			t.Fatal("child cancelled at birth")
		}
		cancel()
	}
	c.mu.Lock()
	kept := c.after
	c.mu.Unlock()
	if kept != nil {
		t.Fatalf("ended children still registered: %d", len(kept))
	}
	live, cancelLive := context.WithCancel(c)
	defer cancelLive()
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	if c.Err() != nil {
		t.Fatal("cancelled before cancel")
	}
	c.cancel()
	c.cancel() // twice: no panic
	deadline := time.After(30 * time.Second)
	select {
	case <-live.Done():
	case <-deadline:
		t.Fatal("a live child was not cancelled with its parent")
	}
	select {
	case <-ran:
	case <-deadline:
		t.Fatal("context.AfterFunc did not run")
	}
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(live.Err(), context.Canceled) {
		t.Fatalf("errors %v / %v, want context.Canceled", c.Err(), live.Err())
	}
	select {
	case <-c.Done(): // first asked after the cancellation: closed all the same
	default:
		t.Fatal("Done not closed after cancel")
	}
	late, cancelLate := context.WithTimeout(c, time.Hour)
	defer cancelLate()
	if late.Err() == nil {
		t.Fatal("a child of a cancelled context is not cancelled")
	}
	if stop := c.AfterFunc(func() {}); stop() {
		t.Fatal("stop after the cancellation reported it stopped the function")
	}
}

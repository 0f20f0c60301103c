package engine

import (
	"errors"
	"testing"
)

func TestReplayStep(t *testing.T) {
	h := CallHash("demo.createTodo", map[string]any{"title": "x"})
	other := CallHash("demo.createTodo", map[string]any{"title": "y"})
	done := Call{State: stateDone, Path: "demo.createTodo", Hash: h}
	await := Call{State: stateAwaiting, Path: "demo.createTodo", Hash: h}
	flight := Call{State: stateInFlight, Path: "demo.createTodo", Hash: h}
	for _, tc := range []struct {
		name       string
		journal    []Call
		seq        int
		path, hash string
		idempotent bool
		want       Step
	}{
		{"empty journal: live", nil, 0, "demo.createTodo", h, false, StepLive},
		{"past the journal: live", []Call{done}, 1, "demo.createTodo", h, false, StepLive},
		{"same call done: answer", []Call{done}, 0, "demo.createTodo", h, false, StepAnswer},
		{"other arguments: diverged", []Call{done}, 0, "demo.createTodo", other, false, StepDiverged},
		{"other tool: diverged", []Call{done}, 0, "demo.listTodos", h, false, StepDiverged},
		{"awaiting last: pause", []Call{done, await}, 1, "demo.createTodo", h, false, StepPause},
		{"awaiting not last: diverged", []Call{await, done}, 0, "demo.createTodo", h, false, StepDiverged},
		{"in flight, not idempotent: interrupted", []Call{flight}, 0, "demo.createTodo", h, false, StepInterrupted},
		{"in flight, idempotent: retry once", []Call{flight}, 0, "demo.createTodo", h, true, StepRetry},
		{"in flight not last: diverged", []Call{flight, done}, 0, "demo.createTodo", h, true, StepDiverged},
		{"unknown state: diverged", []Call{{State: "odd", Path: "demo.createTodo", Hash: h}}, 0, "demo.createTodo", h, false, StepDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplayStep(tc.journal, tc.seq, tc.path, tc.hash, tc.idempotent)
			if got != tc.want {
				t.Fatalf("step %v (%v), want %v", got, err, tc.want)
			}
			if (got == StepDiverged) != errors.Is(err, ErrDiverged) {
				t.Fatalf("error %v for step %v", err, got)
			}
		})
	}
}

func TestReplayEnd(t *testing.T) {
	j := []Call{{State: stateDone}, {State: stateAwaiting}}
	if err := ReplayEnd(j, 2); err != nil {
		t.Fatalf("all calls made: %v", err)
	}
	if err := ReplayEnd(j, 3); err != nil {
		t.Fatalf("more calls after the journal (live after the pause): %v", err)
	}
	if err := ReplayEnd(j, 1); !errors.Is(err, ErrDiverged) {
		t.Fatalf("fewer calls: %v", err)
	}
}

func TestCallHashIsCanonical(t *testing.T) {
	a := CallHash("x.y", map[string]any{"a": 1.0, "b": []any{"c"}})
	b := CallHash("x.y", map[string]any{"b": []any{"c"}, "a": 1.0})
	if a != b || a == CallHash("x.z", map[string]any{"a": 1.0, "b": []any{"c"}}) {
		t.Fatal("hash is not canonical per path and arguments")
	}
}

package mcpruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// journal is what a Step needs of the durable call a run holds: a
// session's (callRun) or a grain's (grainRun, a continuation's or a
// task's).
type journal interface {
	// lockJournal locks the call's journal and returns it, its lock and
	// the call's id.
	lockJournal() (doc *callDoc, mu *sync.Mutex, id string)
	// saveJournal writes the call, fenced (its lock held); an error wraps
	// app.ErrRetry.
	saveJournal() error
	// cutErr is the error that ends a run nobody waits for any more
	// before it starts a step (nil: the run goes on).
	cutErr() error
}

// runStep is step i (named name) of a run of the call j: the journaled
// result if the journal has one (the same name, else app.ErrDiverged),
// else f's, run once the call was written fenced (an owner that lost the
// call never runs f) with app.WithStepKey, and journaled before it is
// returned. interrupted reports an error that leaves the call open for a
// retry (a cut run, a failed or fenced write); f's error does not.
func runStep(ctx context.Context, j journal, i int, name string, f func(context.Context) (json.RawMessage, error)) (res json.RawMessage, interrupted bool, err error) {
	doc, mu, id := j.lockJournal()
	if i < len(doc.Steps) {
		s := doc.Steps[i]
		mu.Unlock()
		if s.Name != name {
			return nil, false, fmt.Errorf("%w: step %d is %q in the journal, the handler asks for %q", app.ErrDiverged, i, s.Name, name)
		}
		return s.Result, false, nil
	}
	if err := j.cutErr(); err != nil { // nobody waits for this run's result: the retry runs the step
		mu.Unlock()
		return nil, true, err
	}
	// A fenced write first: an owner that lost the call never runs f.
	if err := j.saveJournal(); err != nil {
		mu.Unlock()
		return nil, true, err
	}
	key := stepKeyOf(id, i, name)
	mu.Unlock()
	res, err = f(app.WithStepKey(ctx, key))
	if err != nil {
		return nil, false, err
	}
	if res == nil {
		res = json.RawMessage("null")
	}
	mu.Lock()
	defer mu.Unlock()
	doc.Steps = append(doc.Steps, callStep{Name: name, Result: res})
	if err := j.saveJournal(); err != nil {
		doc.Steps = doc.Steps[:i]
		return nil, true, err
	}
	return res, false, nil
}

package mcpgrain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/actors/app"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The states the tests use (declared once: a test may run more than once).
type v2 struct{ Text string }

var (
	stChanged    = mcpgrain.NewState[[]string]("test-changed", mcpgrain.StateOptions[[]string]{})
	stLarge      = mcpgrain.NewState[string]("test-large", mcpgrain.StateOptions[string]{MaxBytes: 10})
	stConcurrent = mcpgrain.NewState[int]("test-concurrent", mcpgrain.StateOptions[int]{})
	stNoScope    = mcpgrain.NewState[int]("test-noscope", mcpgrain.StateOptions[int]{})
	stRetry      = mcpgrain.NewState[int]("test-retry", mcpgrain.StateOptions[int]{})
	stPlainV2    = mcpgrain.NewState[v2]("test-v3", mcpgrain.StateOptions[v2]{Version: 2})
	stMigratedV2 = mcpgrain.NewState[v2]("test-v", mcpgrain.StateOptions[v2]{Version: 2, Migrate: func(version int, raw json.RawMessage) (v2, error) {
		var s string
		err := json.Unmarshal(raw, &s)
		return v2{Text: fmt.Sprintf("%s@%d", s, version)}, err
	}})
)

// fakeScope is a session as the SDK sees it, counting its saves.
type fakeScope struct {
	mu    sync.Mutex
	saved map[string]app.Saved
	saves int
	fail  error // SaveState's error (nil: it stores)
}

func (f *fakeScope) Kind() string             { return app.KindSession }
func (f *fakeScope) ID() string               { return "s1" }
func (f *fakeScope) Principal() *pb.Principal { return &pb.Principal{User: "u"} }
func (f *fakeScope) State(name string) (app.Saved, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.saved[name]
	return v, ok
}
func (f *fakeScope) SaveState(_ context.Context, name string, v app.Saved) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if f.saved == nil {
		f.saved = map[string]app.Saved{}
	}
	f.saved[name] = v
	f.saves++
	return nil
}
func (f *fakeScope) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.saves }

func TestStateUpdateSavesOnlyChangedEncodings(t *testing.T) {
	st := stChanged
	sc := &fakeScope{}
	ctx := app.WithScope(context.Background(), sc)
	if v, err := st.Get(ctx); err != nil || v != nil {
		t.Fatalf("Get of nothing saved = %v, %v; want zero", v, err)
	}
	if _, err := st.Update(ctx, func(*[]string) error { return nil }); err != nil || sc.count() != 0 {
		t.Fatalf("unchanged zero value: err %v, %d saves; want none", err, sc.count())
	}
	v, err := st.Update(ctx, func(v *[]string) error { *v = append(*v, "a"); return nil })
	if err != nil || len(v) != 1 || sc.count() != 1 {
		t.Fatalf("Update = %v, %v, %d saves; want [a], one save", v, err, sc.count())
	}
	if got := sc.saved["test-changed"]; got.Version != 1 || string(got.Value) != `["a"]` {
		t.Fatalf("saved %d %s; want version 1 [\"a\"]", got.Version, got.Value)
	}
	if _, err := st.Update(ctx, func(v *[]string) error { *v = append((*v)[:0], "a"); return nil }); err != nil || sc.count() != 1 {
		t.Fatalf("unchanged Update: err %v, %d saves; want still 1", err, sc.count())
	}
	boom := errors.New("boom")
	if _, err := st.Update(ctx, func(v *[]string) error { *v = nil; return boom }); !errors.Is(err, boom) || sc.count() != 1 {
		t.Fatalf("failing f: err %v, %d saves; want boom, still 1", err, sc.count())
	}
	if v, _ := st.Get(ctx); len(v) != 1 || v[0] != "a" {
		t.Fatalf("Get = %v; want [a]", v)
	}
}

func TestStateTooLargeSavesNothing(t *testing.T) {
	st := stLarge
	sc := &fakeScope{}
	ctx := app.WithScope(context.Background(), sc)
	_, err := st.Update(ctx, func(v *string) error { *v = strings.Repeat("x", 9); return nil })
	if !errors.Is(err, mcpgrain.ErrStateTooLarge) || sc.count() != 0 || !strings.Contains(err.Error(), "11 bytes") {
		t.Fatalf("Update over MaxBytes: err %v, %d saves; want ErrStateTooLarge naming the size, nothing saved", err, sc.count())
	}
	if _, err := st.Update(ctx, func(v *string) error { *v = "12345678"; return nil }); err != nil || sc.count() != 1 {
		t.Fatalf("Update at MaxBytes: err %v, %d saves", err, sc.count())
	}
}

func TestStateConcurrentUpdatesLoseNothing(t *testing.T) {
	st := stConcurrent
	sc := &fakeScope{}
	ctx := app.WithScope(context.Background(), sc)
	const n = 200
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := st.Update(ctx, func(v *int) error { *v++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if v, _ := st.Get(ctx); v != n || sc.count() != n {
		t.Fatalf("after %d concurrent increments: %d, %d saves", n, v, sc.count())
	}
}

func TestStateOutsideASession(t *testing.T) {
	st := stNoScope
	_, err := st.Get(context.Background())
	if !errors.Is(err, mcpgrain.ErrNoScope) || !strings.Contains(err.Error(), "sessionless") {
		t.Fatalf("Get without a session: %v; want ErrNoScope explaining why", err)
	}
	if _, err := st.Update(context.Background(), func(*int) error { return nil }); !errors.Is(err, mcpgrain.ErrNoScope) {
		t.Fatalf("Update without a session: %v; want ErrNoScope", err)
	}
}

func TestStateFailedSaveIsRetryable(t *testing.T) {
	st := stRetry
	sc := &fakeScope{fail: fmt.Errorf("fenced: %w", app.ErrRetry)}
	ctx := app.WithScope(context.Background(), sc)
	if _, err := st.Update(ctx, func(v *int) error { *v = 1; return nil }); !errors.Is(err, mcpgrain.ErrRetry) {
		t.Fatalf("fenced save: %v; want ErrRetry", err)
	}
	if v, _ := st.Get(ctx); v != 0 {
		t.Fatalf("after a fenced save Get = %d; want 0", v)
	}
}

func TestStateVersions(t *testing.T) {
	sc := &fakeScope{saved: map[string]app.Saved{"test-v": {Version: 1, Value: []byte(`"old"`)}, "test-v3": {Version: 3, Value: []byte(`{}`)}}}
	ctx := app.WithScope(context.Background(), sc)
	plain, migrated := stPlainV2, stMigratedV2
	if _, err := plain.Get(ctx); !errors.Is(err, mcpgrain.ErrStateVersion) {
		t.Fatalf("a newer saved version: %v; want ErrStateVersion", err)
	}
	if v, err := migrated.Get(ctx); err != nil || v.Text != "old@1" {
		t.Fatalf("migrated Get = %+v, %v", v, err)
	}
	if _, err := migrated.Update(ctx, func(*v2) error { return nil }); err != nil || sc.saved["test-v"].Version != 2 {
		t.Fatalf("an Update of a migrated value saves it at the new version: %v, %+v", err, sc.saved["test-v"])
	}
}

func TestNewStateRejectsBadDeclarations(t *testing.T) {
	for name, f := range map[string]func(){
		"empty name": func() { mcpgrain.NewState[int]("", mcpgrain.StateOptions[int]{}) },
		"too large":  func() { mcpgrain.NewState[int]("test-big", mcpgrain.StateOptions[int]{MaxBytes: 2 << 20}) },
		"twice": func() {
			mcpgrain.NewState[int]("test-twice", mcpgrain.StateOptions[int]{})
			mcpgrain.NewState[int]("test-twice", mcpgrain.StateOptions[int]{})
		},
		"negative size": func() { mcpgrain.NewState[int]("test-neg", mcpgrain.StateOptions[int]{MaxBytes: -1}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

package tools

import "context"

// Caller is the principal on whose behalf a tool is called: the owner of
// the execution whose code made the call.
type Caller struct {
	// User, Org and Role are the principal's (Role "" when unknown).
	User, Org, Role string
}

type callerKey struct{}

// WithCaller returns ctx carrying c. The execution engine sets it on the
// context of every [Source.Call]; a source that serves several
// organizations (the demo API) reads it with [CallerFrom]. It travels only
// in process: nothing a client sends can set it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

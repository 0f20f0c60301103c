package toolpacks

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks/conformance"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks/demo"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// Pack names.
const (
	// Demo is the pack of small, safe tools (echo, add, now, count_to,
	// ask_confirmation) that make a node useful before real tools exist.
	Demo = "demo"
	// Conformance is the server fixture that the official MCP conformance
	// suite (@modelcontextprotocol/conformance) drives in its server
	// scenarios: every tool, resource and prompt they name.
	Conformance = "conformance"
	// Code is code mode: the execution engine's execute and resume tools.
	// They belong to a session's runtime, so the pack only calls
	// Options.CodeMode, which the runtime provides.
	Code = "code"
)

// CodeAPIChange is the catalog change ([Catalog.ApplyLocal]) that
// registers the code pack's tools again on every server of the node that
// has the pack, with the execute description rendered anew (the tool
// sources' operations changed); each server's clients get
// notifications/tools/list_changed.
const CodeAPIChange = "code.api"

// Options configures [NewServer]. The zero value is usable.
type Options struct {
	// Logger, if non-nil, is the server's logger (it overrides
	// ServerOptions.Logger). Nil: ServerOptions.Logger, else the go-sdk
	// default (discard).
	Logger *slog.Logger
	// ServerOptions, if non-nil, is the base of the go-sdk server options
	// (KeepAlive, GetSessionID, PageSize, Capabilities, ...). It is copied,
	// never modified. A handler it sets (CompletionHandler, SubscribeHandler,
	// ...) that a selected pack also sets is a conflict: NewServer returns an
	// error rather than silently picking one.
	ServerOptions *mcp.ServerOptions
	// Clock tells the demo pack's now tool the time and paces the
	// conformance pack's watched resource. Nil: the system clock.
	Clock clock.Clock
	// CodeMode registers the code pack's tools on the server (the session
	// runtime's engine). Required when the code pack is selected.
	CodeMode func(*mcp.Server)
	// Catalog, if non-nil, is the node's catalog: run-time changes the
	// packs make reach its other servers and, through its broadcast, the
	// other nodes. Nil: the server's changes stay on the server.
	Catalog *Catalog
	// Packs are packs known besides the built-in ones (a program's own,
	// such as an SDK user's server): the names NewServer is given select
	// among both. Nil: the built-ins only. Use [ValidateWith] to check
	// them and a selection first.
	Packs []Pack
}

// Pack is a named set of MCP features a node can serve (app.Pack, which
// the root package exports as mcpgrain.Pack): the mechanism of the
// built-in packs ([Builtin]) and of a program's own.
type Pack = app.Pack

// Env is what a pack's Setup gets from the node (app.Env).
type Env = app.Env

// Handlers are the mcp.ServerOptions handler fields a pack may set
// (app.Handlers).
type Handlers = app.Handlers

// NewPack returns a pack that needs no server-level handlers and does no
// background work: register adds its tools, resources and prompts to each
// server.
func NewPack(name string, register func(s *mcp.Server)) Pack {
	return Pack{Name: name, Setup: plain(func(s *mcp.Server, _ Env) func() { register(s); return nil })}
}

// Builtin returns the built-in packs, in [Names] order.
func Builtin() []Pack {
	return slices.Clone(registry)
}

// Names lists the built-in packs, in a stable order: "code", "demo",
// "conformance".
func Names() []string {
	return NamesWith(nil)
}

// NamesWith lists the built-in packs and then extra, in that order.
func NamesWith(extra []Pack) []string {
	var names []string
	for _, p := range slices.Concat(registry, extra) {
		names = append(names, p.Name)
	}
	return names
}

// Validate returns nil if every name in packs is a known pack, else an
// error naming each unknown pack and listing the known ones. It is meant
// for validating a command-line flag; duplicates are allowed (NewServer
// registers a pack once).
func Validate(packs []string) error {
	return ValidateWith(packs, nil)
}

// ValidateWith is [Validate] for a node that knows extra packs besides
// the built-in ones. It also checks extra: each needs a name, a Setup, and
// a name no other pack has.
func ValidateWith(packs []string, extra []Pack) error {
	if err := checkExtra(extra); err != nil {
		return err
	}
	var unknown []string
	for _, name := range packs {
		if lookup(name, extra) == nil && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	quoted := make([]string, len(unknown))
	for i, name := range unknown {
		quoted[i] = fmt.Sprintf("%q", name)
	}
	noun := "pack"
	if len(unknown) > 1 {
		noun = "packs"
	}
	return fmt.Errorf("unknown tool %s %s (known: %s)", noun, strings.Join(quoted, ", "), strings.Join(NamesWith(extra), ", "))
}

// checkExtra checks a node's own packs: named, set up, and unique among
// all packs.
func checkExtra(extra []Pack) error {
	seen := map[string]bool{}
	for _, p := range registry {
		seen[p.Name] = true
	}
	for _, p := range extra {
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, ", \t\n"):
			return fmt.Errorf("toolpacks: invalid pack name %q", p.Name)
		case p.Setup == nil:
			return fmt.Errorf("toolpacks: pack %q has no Setup", p.Name)
		case seen[p.Name]:
			return fmt.Errorf("toolpacks: two packs are named %q", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// NewServer builds a fresh *mcp.Server with the given packs registered. One
// server may serve many MCP sessions at once (a node shares one between all
// its stateful sessions): the packs keep what a session does keyed by the
// session of the request, never on the server. Duplicate pack names are
// registered once; an empty list gives a server with no features.
//
// The returned closer stops the background work the packs do for this
// server (the conformance pack's watched-resource updates) and waits for
// it. It is safe to call more than once and from several goroutines. On
// error nothing is left running and the closer is nil.
func NewServer(impl *mcp.Implementation, packs []string, opts Options) (*mcp.Server, func(), error) {
	return newServer(impl, packs, opts)
}

// plain is the setup of a pack that needs no server-level handlers.
func plain(register func(s *mcp.Server, e Env) (stop func())) func(Env) (Handlers, func(*mcp.Server) func()) {
	return func(e Env) (Handlers, func(*mcp.Server) func()) {
		return Handlers{}, func(s *mcp.Server) func() { return register(s, e) }
	}
}

// registry is every built-in pack, in Names order.
var registry = []Pack{
	{Name: Code},
	{Name: Demo, Setup: plain(func(s *mcp.Server, e Env) func() { demo.Register(s, e.Clock.Now); return nil })},
	{Name: Conformance, Setup: conformance.Setup},
}

// lookup finds the pack called name among the built-ins and extra.
func lookup(name string, extra []Pack) *Pack {
	for _, packs := range [][]Pack{registry, extra} {
		for i := range packs {
			if packs[i].Name == name {
				return &packs[i]
			}
		}
	}
	return nil
}

func newServer(impl *mcp.Implementation, packs []string, opts Options) (*mcp.Server, func(), error) {
	if impl == nil {
		return nil, nil, errors.New("toolpacks: nil Implementation")
	}
	if err := ValidateWith(packs, opts.Packs); err != nil {
		return nil, nil, err
	}
	var selected []*Pack
	for _, name := range packs {
		p := lookup(name, opts.Packs)
		if !slices.Contains(selected, p) {
			selected = append(selected, p)
		}
	}

	var so mcp.ServerOptions
	if opts.ServerOptions != nil {
		so = *opts.ServerOptions
	}
	if opts.Logger != nil {
		so.Logger = opts.Logger
	}
	catalog := opts.Catalog
	if catalog == nil {
		catalog = NewCatalog()
	}
	e := Env{Clock: opts.Clock, Catalog: catalog}
	if e.Clock == nil {
		e.Clock = clock.Real()
	}
	m := merger{opts: &so, owners: map[string]string{}}
	m.claimBase()
	var registers []func(*mcp.Server) func()
	for _, p := range selected {
		if p.Name == Code {
			if opts.CodeMode == nil {
				return nil, nil, errors.New("toolpacks: the code pack needs Options.CodeMode (a session runtime)")
			}
			registers = append(registers, func(s *mcp.Server) func() {
				opts.CodeMode(s)
				catalog.Define(CodeAPIChange, s, opts.CodeMode)
				return nil
			})
			continue
		}
		h, register := p.Setup(e)
		m.merge(p.Name, h)
		registers = append(registers, register)
	}
	if err := errors.Join(m.errs...); err != nil {
		return nil, nil, err
	}
	if (so.SubscribeHandler == nil) != (so.UnsubscribeHandler == nil) {
		return nil, nil, errors.New("toolpacks: SubscribeHandler and UnsubscribeHandler must be set together")
	}

	server, err := newMCPServer(impl, &so)
	if err != nil {
		return nil, nil, err
	}
	unbindSchedules := app.BindSchedules(server, m.schedules)
	unbindContinuations := app.BindContinuations(server, m.continuations)
	var stops []func()
	for _, register := range registers {
		if stop := register(server); stop != nil {
			stops = append(stops, stop)
		}
	}
	closer := sync.OnceFunc(func() {
		catalog.forget(server)
		unbindSchedules()
		unbindContinuations()
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	})
	return server, closer, nil
}

// newMCPServer calls mcp.NewServer, turning its option-validation panics
// (negative PageSize, unsupported protocol version, ...) into errors. The
// server turns a handler's app.ErrInputRequired (the SDK's Elicit in the
// 2026-07-28 era) into the call's input_required result.
func newMCPServer(impl *mcp.Implementation, so *mcp.ServerOptions) (s *mcp.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("toolpacks: invalid server options: %v", r)
		}
	}()
	s = mcp.NewServer(impl, so)
	s.AddReceivingMiddleware(app.InputRequiredMiddleware)
	return s, nil
}

// merger folds the packs' handlers into server options, refusing to let two
// sources set the same handler.
type merger struct {
	// schedules are the packs' callbacks, merged.
	schedules map[string]app.ScheduleFunc
	// continuations are the packs' continuations, merged.
	continuations map[string]app.ContinueFunc
	opts          *mcp.ServerOptions
	owners        map[string]string // handler field -> who set it
	errs          []error
}

const baseOwner = "Options.ServerOptions"

// claimBase records the handlers already set in the base options.
func (m *merger) claimBase() {
	o := m.opts
	for field, set := range map[string]bool{
		"InitializedHandler":          o.InitializedHandler != nil,
		"ProgressNotificationHandler": o.ProgressNotificationHandler != nil,
		"CompletionHandler":           o.CompletionHandler != nil,
		"SubscribeHandler":            o.SubscribeHandler != nil,
		"UnsubscribeHandler":          o.UnsubscribeHandler != nil,
	} {
		if set {
			m.owners[field] = baseOwner
		}
	}
}

func (m *merger) merge(packName string, h Handlers) {
	o := m.opts
	m.claim(packName, "InitializedHandler", h.InitializedHandler != nil, func() { o.InitializedHandler = h.InitializedHandler })
	m.claim(packName, "ProgressNotificationHandler", h.ProgressNotificationHandler != nil, func() { o.ProgressNotificationHandler = h.ProgressNotificationHandler })
	m.claim(packName, "CompletionHandler", h.CompletionHandler != nil, func() { o.CompletionHandler = h.CompletionHandler })
	m.claim(packName, "SubscribeHandler", h.SubscribeHandler != nil, func() { o.SubscribeHandler = h.SubscribeHandler })
	m.claim(packName, "UnsubscribeHandler", h.UnsubscribeHandler != nil, func() { o.UnsubscribeHandler = h.UnsubscribeHandler })
	m.mergeSchedules(packName, h.Schedules)
	m.mergeContinuations(packName, h.Continuations)
}

func (m *merger) claim(packName, field string, set bool, assign func()) {
	if !set {
		return
	}
	if owner, ok := m.owners[field]; ok {
		if owner != baseOwner {
			owner = fmt.Sprintf("pack %q", owner)
		}
		m.errs = append(m.errs, fmt.Errorf("toolpacks: conflicting %s: set by %s and pack %q", field, owner, packName))
		return
	}
	m.owners[field] = packName
	assign()
}

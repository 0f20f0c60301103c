package toolpacks

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The conformance pack is the server side of the official MCP conformance
// suite (@modelcontextprotocol/conformance, pinned in tools/conformance):
// the tools, resources and prompts its server scenarios call by name, each
// answering as the scenario's requirements say. It is written from those
// requirements (each scenario's description in the suite) and from the
// specification, not from another project's fixture.
//
// The pack lives on servers that many sessions share (a node runs one
// server for all its stateful sessions; see actors/mcpruntime). So nothing
// a session does is kept on the server: what the fixture remembers of a
// session (its resource subscriptions) is keyed by the request's
// *mcp.ServerSession and dropped when that session ends
// ([conformanceFixture.sessions]), and go-sdk keeps each session's log
// level and negotiated version on the session itself. What is the server's
// is done once per server: the watched resource changes on one timer for
// all its subscribers, armed only while someone subscribes.
//
// The files, by concept:
//
//   - conformance.go: the fixture, its setup, the test media.
//   - conformance_sessions.go: per-session state.
//   - conformance_tools.go: tools that answer by themselves (content types,
//     errors, logging, progress, schemas, headers, stream closing,
//     list changes).
//   - conformance_client.go: tools that need the client (sampling,
//     elicitation) and the capability check they share.
//   - conformance_input_required.go: the 2026-07-28 multi-round-trip
//     (input_required) tools and prompt, and their requestState.
//   - conformance_resources.go: resources, the template, subscriptions and
//     the watched resource.
//   - conformance_prompts.go: prompts and completion.
//
//   - conformance_tasks.go: the tasks extension's tools (greet,
//     slow_compute, failing_job, protocol_error_job, confirm_delete,
//     multi_input, test_tool_with_task) and their task support
//     ([TaskSupport]).

// conformanceLogger names the fixture's log messages (notifications/message).
const conformanceLogger = "conformance"

// conformanceFixture is one server's instance of the conformance pack.
type conformanceFixture struct {
	// server is the server the fixture is registered on (set by register,
	// before any request can arrive).
	server *mcp.Server
	// sessions is the per-session state.
	sessions *sessionStates
	// watched is the resource that changes while it has subscribers.
	watched *watchedResource
	// catalog replicates the list-change triggers' changes.
	catalog *Catalog
}

// setupConformance prepares the conformance pack for one server: it needs
// the completion and subscription handlers in the server options.
func setupConformance(e Env) (Handlers, func(*mcp.Server) (stop func())) {
	f := &conformanceFixture{catalog: e.catalog}
	f.watched = newWatchedResource(e.Clock, watchedResourceInterval, func(ctx context.Context) {
		// Delivered by go-sdk to every session subscribed to the URI.
		_ = f.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedResourceURI})
	})
	f.sessions = newSessionStates(f.sessionEnded)
	h := Handlers{
		CompletionHandler:  f.complete,
		SubscribeHandler:   f.subscribe,
		UnsubscribeHandler: f.unsubscribe,
	}
	return h, f.register
}

// register adds the fixture's features to server; the returned function
// stops the watched resource's updates and waits for one in progress.
func (f *conformanceFixture) register(server *mcp.Server) (stop func()) {
	f.server = server
	f.addTools(server)
	f.addClientTools(server)
	f.addInputRequiredTools(server)
	f.addTaskTools(server)
	f.addResources(server)
	f.addPrompts(server)
	return func() {
		f.sessions.close()
		f.watched.close()
	}
}

// pause waits d, or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// text is a one-item text content list.
func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// Test media: tiny files of their kind (a 1x1 PNG, 10 ms of WAV), made
// here rather than shipped as opaque bytes.
var (
	redPixelPNG = sync.OnceValue(func() []byte {
		img := image.NewRGBA(image.Rect(0, 0, 1, 1))
		img.Set(0, 0, color.RGBA{R: 0xff, A: 0xff})
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			panic(err) // encoding an in-memory image into a buffer cannot fail
		}
		return b.Bytes()
	})
	silentWAV = sync.OnceValue(func() []byte { return pcmWAV(8000, make([]int16, 80)) })
)

// pcmWAV encodes mono 16-bit PCM samples at rate as a RIFF/WAVE file.
func pcmWAV(rate uint32, samples []int16) []byte {
	const channels, bits = 1, 16
	data := uint32(len(samples) * bits / 8)
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(36 + data)
	b.WriteString("WAVEfmt ")
	w(uint32(16))                  // fmt chunk size
	w(uint16(1))                   // PCM
	w(uint16(channels))            // channels
	w(rate)                        // sample rate
	w(rate * channels * bits / 8)  // byte rate
	w(uint16(channels * bits / 8)) // block align
	w(uint16(bits))                // bits per sample
	b.WriteString("data")
	w(data)
	w(samples)
	return b.Bytes()
}

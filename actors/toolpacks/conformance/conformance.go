package conformance

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

	"github.com/mcpgrain/mcpgrain/actors/app"
)

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
	catalog app.Catalog
}

// Setup prepares the conformance pack for one server (the Setup of its
// app.Pack): it needs the completion and subscription handlers in the
// server options, the node's clock (the watched resource's timer) and its
// catalog (the list-change triggers), and stops the watched resource's
// updates when the server closes.
func Setup(e app.Env) (app.Handlers, func(*mcp.Server) (stop func())) {
	f := &conformanceFixture{catalog: e.Catalog}
	f.watched = newWatchedResource(e.Clock, watchedResourceInterval, func(ctx context.Context) {
		// Delivered by go-sdk to every session subscribed to the URI.
		_ = f.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedResourceURI})
	})
	f.sessions = newSessionStates(f.sessionEnded)
	h := app.Handlers{
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

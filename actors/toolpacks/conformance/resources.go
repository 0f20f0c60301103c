package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// The fixture's resources (scenarios resources-*, sep-2164-resource-not-found,
// caching).
const (
	staticTextURI      = "test://static-text"
	staticBinaryURI    = "test://static-binary"
	watchedResourceURI = "test://watched-resource"
	// dataTemplate is the resource template; {id} is any non-empty path
	// segment.
	dataTemplate       = "test://template/{id}/data"
	dataTemplatePrefix = "test://template/"
	dataTemplateSuffix = "/data"

	staticText = "This is the content of the static text resource."
)

// watchedResourceInterval is how often the watched resource changes while
// someone subscribes to it.
const watchedResourceInterval = 2 * time.Second

func (f *conformanceFixture) addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI:         staticTextURI,
		Name:        "static-text",
		Title:       "Static text",
		Description: "A plain-text resource whose content never changes.",
		MIMEType:    "text/plain",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: staticTextURI, MIMEType: "text/plain", Text: staticText}}}, nil
	})
	s.AddResource(&mcp.Resource{
		URI:         staticBinaryURI,
		Name:        "static-binary",
		Title:       "Static binary",
		Description: "A binary resource: a 1x1 red PNG image.",
		MIMEType:    "image/png",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: staticBinaryURI, MIMEType: "image/png", Blob: redPixelPNG()}}}, nil
	})
	s.AddResource(&mcp.Resource{
		URI:         watchedResourceURI,
		Name:        "watched-resource",
		Title:       "Watched resource",
		Description: fmt.Sprintf("A plain-text resource that changes every %s while a client subscribes to it; subscribers get notifications/resources/updated.", watchedResourceInterval),
		MIMEType:    "text/plain",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: watchedResourceURI, MIMEType: "text/plain",
			Text: fmt.Sprintf("Watched resource, version %d.", f.watched.currentVersion()),
		}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: dataTemplate,
		Name:        "template",
		Title:       "Data by id",
		Description: "A JSON document for any id: test://template/{id}/data.",
		MIMEType:    "application/json",
	}, readDataTemplate)
}

// readDataTemplate substitutes the id of test://template/{id}/data.
func readDataTemplate(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := dataTemplateID(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	doc, err := json.Marshal(struct {
		ID           string `json:"id"`
		TemplateTest bool   `json:"templateTest"`
		Data         string `json:"data"`
	}{id, true, "Data for ID: " + id})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(doc)}}}, nil
}

// dataTemplateID is the {id} of a URI of the data template.
func dataTemplateID(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, dataTemplatePrefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, dataTemplateSuffix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", false
	}
	return id, true
}

// knownResource reports whether uri names one of the fixture's resources.
func knownResource(uri string) bool {
	switch uri {
	case staticTextURI, staticBinaryURI, watchedResourceURI:
		return true
	}
	_, ok := dataTemplateID(uri)
	return ok
}

// subscribe records a session's subscription (SubscribeHandler). go-sdk
// delivers the updates to the session; the fixture counts the watched
// resource's subscribers, so that it changes only while it has some.
func (f *conformanceFixture) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if !knownResource(uri) {
		return mcp.ResourceNotFoundError(uri)
	}
	ok := f.sessions.update(req.Session, func(st *conformanceSession) {
		if st.subscriptions[uri] {
			return
		}
		st.subscriptions[uri] = true
		if uri == watchedResourceURI {
			f.watched.addSubscriber()
		}
	})
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is stopping"}
	}
	return nil
}

// unsubscribe forgets a session's subscription (UnsubscribeHandler);
// unsubscribing from a resource the session did not subscribe to is not an
// error.
func (f *conformanceFixture) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	f.sessions.update(req.Session, func(st *conformanceSession) {
		if !st.subscriptions[uri] {
			return
		}
		delete(st.subscriptions, uri)
		if uri == watchedResourceURI {
			f.watched.removeSubscriber()
		}
	})
	return nil
}

// sessionEnded releases what an ended session held: go-sdk forgets its
// subscriptions without calling the UnsubscribeHandler.
func (f *conformanceFixture) sessionEnded(_ *mcp.ServerSession, st *conformanceSession) {
	if st.subscriptions[watchedResourceURI] {
		f.watched.removeSubscriber()
	}
}

// watchedResource is the resource whose content changes on a timer while
// sessions subscribe to it. However many subscribe, a server has one timer
// for it, armed only while there is a subscriber; each change is one
// version more and one notification to every subscriber.
type watchedResource struct {
	clock    app.Clock
	interval time.Duration
	changed  func(context.Context) // notifies the subscribers

	mu          sync.Mutex
	version     int
	subscribers int
	timer       app.Timer // armed while subscribers > 0
	generation  int       // the armed timer's; a tick of an older one does nothing
	closed      bool
	notifying   sync.WaitGroup // changes being announced
}

func newWatchedResource(c app.Clock, interval time.Duration, changed func(context.Context)) *watchedResource {
	return &watchedResource{clock: c, interval: interval, changed: changed}
}

func (w *watchedResource) currentVersion() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

func (w *watchedResource) addSubscriber() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subscribers++
	if w.subscribers == 1 && !w.closed {
		w.arm()
	}
}

func (w *watchedResource) removeSubscriber() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subscribers--
	if w.subscribers == 0 {
		w.disarm()
	}
}

// arm starts the timer of the next change (w.mu held).
func (w *watchedResource) arm() {
	w.generation++
	g := w.generation
	w.timer = w.clock.AfterFunc(w.interval, func() { w.tick(g) })
}

// disarm stops the timer (w.mu held).
func (w *watchedResource) disarm() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.generation++
}

// tick is one change: a new version, announced to the subscribers, and the
// timer of the next one.
func (w *watchedResource) tick(generation int) {
	w.mu.Lock()
	if w.closed || generation != w.generation {
		w.mu.Unlock()
		return
	}
	w.version++
	w.arm()
	w.notifying.Add(1)
	w.mu.Unlock()
	defer w.notifying.Done()
	ctx, cancel := context.WithTimeout(context.Background(), w.interval)
	defer cancel()
	w.changed(ctx)
}

// close stops the changes and waits for one being announced.
func (w *watchedResource) close() {
	w.mu.Lock()
	w.closed = true
	w.disarm()
	w.mu.Unlock()
	w.notifying.Wait()
}

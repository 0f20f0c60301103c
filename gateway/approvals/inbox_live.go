package approvals

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// DefaultWatchInterval is how often a watcher of paused executions (a
// live inbox, a gRPC WatchPausedExecutions) looks for new ones, where its
// options leave it zero.
const DefaultWatchInterval = 500 * time.Millisecond

// Defaults of the inbox's live stream.
const (
	defaultStreamAge = 5 * time.Minute
	// redrawEvery redraws an unchanged inbox (times left, and a heartbeat
	// through proxies).
	redrawEvery = 30 * time.Second
	// reconnectMs is how soon a browser reconnects a dropped stream.
	reconnectMs = 2000
)

// inboxScript is the inbox's live updates: the page works without it
// (forms post, Reload shows changes). It swaps in the server-rendered list
// from /approvals/events (EventSource reconnects on its own; a refused
// stream is retried later) and counts the times left down.
const inboxScript = `"use strict";
(function () {
  var box = document.getElementById("inbox"), live = document.getElementById("live");
  if (!box || !window.EventSource) return;
  function say(t) { if (live) live.textContent = t; }
  function tick() {
    var els = document.querySelectorAll(".time-left[data-deadline]"), now = Date.now();
    for (var i = 0; i < els.length; i++) {
      var s = Math.floor((Number(els[i].getAttribute("data-deadline")) - now) / 1000);
      if (s <= 0) { els[i].textContent = "expired"; continue; }
      var m = Math.floor(s / 60);
      els[i].textContent = (m > 0 ? m + "m" : "") + (s % 60) + "s left";
    }
  }
  function connect() {
    var es = new EventSource("/approvals/events");
    es.addEventListener("open", function () { say("Live."); });
    es.addEventListener("inbox", function (e) { box.innerHTML = e.data; tick(); });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) { say("Live updates paused; retrying…"); setTimeout(connect, 10000); }
      else say("Reconnecting…");
    });
  }
  connect();
  setInterval(tick, 1000);
})();
`

// script serves GET /approvals/inbox.js.
func (p *page) script(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = io.WriteString(w, inboxScript)
}

// events serves GET /approvals/events: the inbox's list as server-sent
// events, drawn when it changes (pauses appear or settle anywhere in the
// cluster: the directory is shared) and every redrawEvery. The node's
// streams of one organization share one directory poll ([feeds]). A
// stream ends after InboxStreamAge (the browser reconnects, signing in
// again) or when the node stops; each principal holds at most
// InboxStreamsPerPrincipal of them.
func (p *page) events(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) { // another site (even a sibling one) must not use up the principal's streams
		http.Error(w, "cross-site event streams are refused", http.StatusForbidden)
		return
	}
	who, ok, err := p.principal(r)
	if !ok {
		if !p.failedSignIns(w, err) {
			http.Error(w, "sign in at /approvals", http.StatusUnauthorized)
		}
		return
	}
	if p.limited(w, who) {
		return
	}
	release, ok := p.streams.acquire(principalKey(who.GetOrg(), who.GetUser()))
	if !ok {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many live inbox streams", http.StatusTooManyRequests)
		return
	}
	defer release()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	ctx, cancel := context.WithTimeout(r.Context(), p.o.InboxStreamAge)
	defer cancel()
	p.stream(ctx, w, who)
}

// stream writes the inbox of who to w until ctx ends or a write fails.
func (p *page) stream(ctx context.Context, w http.ResponseWriter, who *pb.Principal) {
	rc := http.NewResponseController(w)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", reconnectMs); err != nil || rc.Flush() != nil {
		return
	}
	updates, leave := p.feeds.subscribe(who.GetOrg())
	defer leave()
	var lastKey string
	var lastDraw time.Time
	for {
		var u inboxUpdate
		select {
		case <-ctx.Done():
			return
		case u = <-updates:
		}
		if p.o.Stopping != nil && p.o.Stopping() {
			return // the browser reconnects, to a node that stays
		}
		now, err := p.svc.now(), u.err
		switch {
		case err != nil:
			_, err = io.WriteString(w, ": directory unavailable\n\n")
		case u.in.Key() != lastKey || now.Sub(lastDraw) >= redrawEvery:
			lastKey, lastDraw = u.in.Key(), now
			err = p.drawList(w, who, u.in, now)
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}

// drawList writes one "inbox" event: the list's HTML.
func (p *page) drawList(w io.Writer, who *pb.Principal, in Inbox, now time.Time) error {
	var buf bytes.Buffer
	if err := inboxTmpl.ExecuteTemplate(&buf, "list", p.listFor(who, in, now)); err != nil {
		return fmt.Errorf("render inbox list: %w", err)
	}
	return writeEvent(w, "inbox", buf.String())
}

// writeEvent writes a server-sent event. Every line of data, whatever
// ends it (CR, LF, CRLF), gets its own data field: data cannot start
// fields of its own.
func writeEvent(w io.Writer, name, data string) error {
	data = strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}

package approvals

import (
	"context"
	"log/slog"
	"sync"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// inboxUpdate is one look at an organization's inbox.
type inboxUpdate struct {
	in  Inbox
	err error
}

// feeds shares one directory poll per organization among the live inbox
// streams of a node: however many browsers watch an organization, the
// node reads its inbox once per interval. It is safe for concurrent use.
type feeds struct {
	poll     func(ctx context.Context, org string) (Inbox, error)
	interval time.Duration
	log      *slog.Logger
	mu       sync.Mutex
	orgs     map[string]*feed
}

// feed is one organization's poll and its subscribers.
type feed struct {
	subs map[chan inboxUpdate]struct{}
	last *inboxUpdate
	stop context.CancelFunc
}

func newFeeds(svc *Service, interval time.Duration, log *slog.Logger) *feeds {
	return &feeds{
		poll: func(ctx context.Context, org string) (Inbox, error) {
			return svc.Inbox(ctx, &pb.Principal{Org: org})
		},
		interval: interval,
		log:      log,
		orgs:     map[string]*feed{},
	}
}

// subscribe returns org's updates, the latest look first (stale ones are
// dropped for newer ones), and a function that stops them (once). The
// organization's poll runs while it has subscribers.
func (f *feeds) subscribe(org string) (<-chan inboxUpdate, func()) {
	ch := make(chan inboxUpdate, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	fd, ok := f.orgs[org]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		fd = &feed{subs: map[chan inboxUpdate]struct{}{}, stop: cancel}
		f.orgs[org] = fd
		go f.run(ctx, org, fd)
	}
	fd.subs[ch] = struct{}{}
	if fd.last != nil {
		ch <- *fd.last
	}
	var once sync.Once
	return ch, func() { once.Do(func() { f.leave(org, fd, ch) }) }
}

func (f *feeds) leave(org string, fd *feed, ch chan inboxUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(fd.subs, ch)
	if len(fd.subs) == 0 {
		fd.stop()
		delete(f.orgs, org)
	}
}

// run polls org until ctx ends.
func (f *feeds) run(ctx context.Context, org string, fd *feed) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	var failing bool
	for {
		in, err := f.poll(ctx, org)
		if ctx.Err() != nil {
			return
		}
		if err != nil && !failing {
			f.log.Warn("approvals: inbox poll failed", "org", org, "err", err)
		}
		failing = err != nil
		f.publish(fd, inboxUpdate{in: in, err: err})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publish hands u to every subscriber of fd, replacing an update it has
// not taken yet.
func (f *feeds) publish(fd *feed, u inboxUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd.last = &u
	for ch := range fd.subs {
		select {
		case <-ch: // stale: only this feed sends, so there is room after
		default:
		}
		ch <- u
	}
}

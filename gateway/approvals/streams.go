package approvals

import (
	"strings"
	"sync"
)

// Default bounds of the inbox's live streams.
const (
	defaultStreamsPerPrincipal = 4
	defaultStreams             = 512
)

// streamLimits bounds concurrent live streams per principal and per node,
// so one principal cannot exhaust the streams (and directory reads) of
// others. It is safe for concurrent use.
type streamLimits struct {
	mu           sync.Mutex
	perPrincipal int
	total        int
	open         map[string]int
	all          int
}

func newStreamLimits(perPrincipal, total int) *streamLimits {
	if perPrincipal <= 0 {
		perPrincipal = defaultStreamsPerPrincipal
	}
	if total <= 0 {
		total = defaultStreams
	}
	return &streamLimits{perPrincipal: perPrincipal, total: total, open: map[string]int{}}
}

// acquire takes a stream for key; release gives it back (once).
func (l *streamLimits) acquire(key string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.perPrincipal || l.all >= l.total {
		return nil, false
	}
	l.open[key]++
	l.all++
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, true
}

func (l *streamLimits) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key) // the map holds only principals with streams
	}
}

// principalKey identifies a principal for stream limits.
func principalKey(org, user string) string {
	return strings.Join([]string{org, user}, "\x00")
}

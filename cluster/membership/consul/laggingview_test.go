package consul

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// laggingAgent is a fake Consul agent whose blocking health queries are
// answered from a streaming view stuck at index 19, before the second
// member registered, while a fresh read (index 0) reaches the servers,
// which have both members at index 20 after the first read. A real
// v1.14 dev agent did this for minutes on a loaded machine while its
// subscription to the servers kept failing ("subscribe call failed");
// it cannot be produced on demand, hence the fake.
type laggingAgent struct {
	mu     sync.Mutex
	fresh  int // fresh reads answered
	blocks int // blocking reads answered
}

func (a *laggingAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/health/service/") {
		w.WriteHeader(http.StatusOK) // register, TTL updates, deregister
		return
	}
	self := &api.ServiceEntry{Service: &api.AgentService{ID: "self", Address: "127.0.0.1", Port: 7001}}
	other := &api.ServiceEntry{Service: &api.AgentService{ID: "other", Address: "127.0.0.1", Port: 7002}}
	index, entries := uint64(19), []*api.ServiceEntry{self}
	a.mu.Lock()
	if r.URL.Query().Get("index") == "" || r.URL.Query().Get("index") == "0" {
		if a.fresh > 0 {
			index, entries = 20, []*api.ServiceEntry{self, other}
		}
		a.fresh++
	} else {
		a.blocks++
	}
	a.mu.Unlock()
	if r.URL.Query().Get("index") != "" && r.URL.Query().Get("index") != "0" {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		select { // the blocking query runs its wait out: the view never moves
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	_ = json.NewEncoder(w).Encode(entries)
}

func (a *laggingAgent) reads() (fresh, blocks int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fresh, a.blocks
}

// A member whose first read predates another member's registration, and
// whose agent's streaming view then never moves, still sees that member:
// an unchanged blocking answer is followed by a fresh read, and an answer
// older than the published view is dropped, not published.
func TestALaggingStreamingViewIsCorrectedByFreshReads(t *testing.T) {
	agent := &laggingAgent{}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	p, err := New(Config{Address: strings.TrimPrefix(srv.URL, "http://"), ClusterName: "mcpgrain",
		WatchWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		views []membership.View
	)
	err = p.Start(context.Background(), membership.Member{ID: "self", Address: "127.0.0.1:7001"}, func(e membership.Event) {
		mu.Lock()
		defer mu.Unlock()
		views = append(views, e.View)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	// Progress, not time: wait until the watch has gone through several
	// blocking answers of the stuck view (and the reads that follow them).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, blocks := agent.reads(); blocks >= 6 {
			break
		}
		if time.Now().After(deadline) {
			fresh, blocks := agent.reads()
			t.Fatalf("the watch made %d fresh and %d blocking reads in 2 min", fresh, blocks)
		}
		time.Sleep(10 * time.Millisecond) // polling the fake's counters, not synchronising the watch
	}
	mu.Lock()
	defer mu.Unlock()
	first := -1
	for i, v := range views {
		if v.Contains("other") && first < 0 {
			first = i
		}
		if first >= 0 && !v.Contains("other") {
			t.Errorf("view %d dropped the member again after seeing it: %v", i, v)
		}
	}
	if first < 0 {
		t.Fatalf("the published views never held the member the servers have: %v", views)
	}
}

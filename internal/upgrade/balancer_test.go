package upgrade_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// balancer is the load balancer in front of the cluster: round robin over
// the nodes whose /readyz answers 200 (checked every 200 ms, so a node
// that begins to drain leaves the rotation within that), trying another
// node when a connection cannot be made (nothing was sent), and answering
// 502 itself when a node dies under a request.
type balancer struct {
	c       *testcluster.Cluster
	next    atomic.Uint64
	healthy []atomic.Bool
	rt      http.RoundTripper
}

func newBalancer(ctx context.Context, c *testcluster.Cluster) *balancer {
	b := &balancer{c: c, healthy: make([]atomic.Bool, len(c.Nodes())), rt: &http.Transport{MaxIdleConnsPerHost: 64}}
	check := func() {
		hc := &http.Client{Timeout: 300 * time.Millisecond}
		for i, n := range c.Nodes() {
			resp, err := hc.Get("http://" + n.HTTP + "/readyz")
			b.healthy[i].Store(err == nil && resp.StatusCode == http.StatusOK)
			if resp != nil {
				resp.Body.Close()
			}
		}
	}
	check()
	go func() {
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				check()
			}
		}
	}()
	return b
}

// RoundTrip sends r to the next healthy node, with the test cluster's
// bearer token.
func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	nodes := b.c.Nodes()
	var lastErr error
	for range 2 * len(nodes) {
		i := int(b.next.Add(1)) % len(nodes)
		if !b.healthy[i].Load() {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.URL.Host, r2.Host = nodes[i].HTTP, nodes[i].HTTP
		r2.Header.Set("Authorization", "Bearer "+testcluster.Token)
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			r2.Body = body
		}
		resp, err := b.rt.RoundTrip(r2)
		var op *net.OpError
		if err != nil && errors.As(err, &op) && op.Op == "dial" {
			lastErr = err
			continue
		}
		if err != nil && r.Context().Err() == nil {
			return synthetic(r, http.StatusBadGateway, "upstream node "+nodes[i].ID+" lost: "+err.Error()), nil
		}
		return resp, err
	}
	if lastErr == nil {
		return synthetic(r, http.StatusServiceUnavailable, "no healthy node"), nil
	}
	return nil, lastErr
}

// synthetic is an answer the balancer makes itself.
func synthetic(r *http.Request, status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"1"}}, Body: io.NopCloser(strings.NewReader(body)),
		Request: r,
	}
}

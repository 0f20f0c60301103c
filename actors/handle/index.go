package handle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The handles index: a row per live handle — its principal, the tool that
// minted it, when it was minted and last used — so a principal's handles can be listed and the
// cluster's counted without reading the grains' records (whose principal
// is inside an encoded record, and whose states may be large). The handle
// grain writes its row in the transactions that write its record (create,
// and every commit that moves its last use), fenced by the same epoch;
// the row references the grain's and goes with it (ON DELETE CASCADE),
// so a dropped or expired handle leaves no row, in the same transaction.

func init() { store.RegisterMigrations("actors/handle", migrations...) }

// migrations are the handles index's steps (versions of the store's one
// sequence; see store.RegisterMigrations).
var migrations = []store.Migration{
	{Version: 15, Name: "SDK handles: a principal's live handles", Stmts: []string{
		`CREATE TABLE handles (
			grain TEXT PRIMARY KEY REFERENCES grains (grain) ON DELETE CASCADE,
			org TEXT NOT NULL,
			user_id TEXT NOT NULL,
			tool TEXT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			used_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX handles_principal ON handles (org, user_id, created_at_ms)`,
	}},
}

// maxToolBytes bounds the tool name an index row keeps.
const maxToolBytes = 128

// indexIn is the handle's index row as a statement of the grain's step
// (store.Writes.Also): inserted with the record that creates the handle
// (tool: the tool that minted it), its last use moved by later commits.
// An upsert, so a handle minted before the index existed gets its row (no
// tool) at its next use.
func indexIn(rec *pb.HandleRecord, tool string) store.Stmt {
	p := rec.GetPrincipal()
	if len(tool) > maxToolBytes {
		tool = strings.ToValidUTF8(tool[:maxToolBytes], "")
	}
	return store.Stmt{SQL: `INSERT INTO handles (grain, org, user_id, tool, created_at_ms, used_at_ms)
SELECT $1, CAST($3 AS TEXT), CAST($4 AS TEXT), CAST($5 AS TEXT), CAST($6 AS BIGINT), CAST($7 AS BIGINT) WHERE EXISTS (SELECT 1 FROM f)
ON CONFLICT (grain) DO UPDATE SET used_at_ms = excluded.used_at_ms`,
		Args: []any{p.GetOrg(), p.GetUser(), tool, rec.GetCreatedAtMs(), rec.GetUsedAtMs()}}
}

// listQuery lists a principal's handles, the most recently minted first.
const listQuery = `SELECT grain, tool, created_at_ms, used_at_ms FROM handles
WHERE org = $1 AND user_id = $2 ORDER BY created_at_ms DESC, grain DESC LIMIT $3`

// List implements app.Handles: p's live handles, read from the index (any
// node answers; no handle grain is activated).
func (h *Host) List(ctx context.Context, p *pb.Principal) ([]app.HandleInfo, error) {
	if p.GetUser() == "" {
		return nil, errors.New("mcpgrain: listing handles needs an authenticated caller")
	}
	return h.list(ctx, p.GetOrg(), p.GetUser())
}

// ListOf returns the live handles of user of organization org, for an
// administrator's inspection (the caller checks who may see them).
func (h *Host) ListOf(ctx context.Context, org, user string) ([]app.HandleInfo, error) {
	return h.list(ctx, org, user)
}

func (h *Host) list(ctx context.Context, org, user string) ([]app.HandleInfo, error) {
	if h.cfg.Store == nil {
		return nil, errors.New("mcpgrain: handles cannot be listed: the node has no store")
	}
	rows, err := h.cfg.Store.DB().Reader().QueryContext(ctx, listQuery, org, user, app.MaxListedHandles)
	if err != nil {
		return nil, fmt.Errorf("mcpgrain: list handles: %w (%w)", app.ErrRetry, err)
	}
	defer rows.Close()
	now := h.now()
	out := []app.HandleInfo{}
	for rows.Next() {
		var (
			key, tool      string
			created, saved int64
		)
		if err := rows.Scan(&key, &tool, &created, &saved); err != nil {
			return nil, fmt.Errorf("mcpgrain: list handles: %w", err)
		}
		used := time.UnixMilli(saved)
		info := app.HandleInfo{ID: strings.TrimPrefix(key, grain.Key(KindName, "")), Tool: tool, Created: time.UnixMilli(created),
			LastUsed: used, Expires: used.Add(h.cfg.IdleTTL)}
		if info.Expires.After(now) { // else expired: its reminder deletes it
			out = append(out, info)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mcpgrain: list handles: %w (%w)", app.ErrRetry, err)
	}
	return out, nil
}

// liveCountEvery is how long a count of the live handles serves scrapes:
// the count is a query of the shared store, whose answer every node of a
// cluster reports alike.
const liveCountEvery = 10 * time.Second

// liveCollector reports mcpgrain_live_handles: the store's count of live
// handles, every node's, read at most once per scrape and at most once per
// liveCountEvery (every node of a cluster is scraped).
type liveCollector struct {
	count func(ctx context.Context) (int64, error)
	clk   clock.Clock
	log   *slog.Logger
	desc  *prometheus.Desc

	mu   sync.Mutex
	at   time.Time // when last counted (zero: never)
	last int64
}

func newLiveCollector(count func(ctx context.Context) (int64, error), clk clock.Clock, log *slog.Logger) *liveCollector {
	return &liveCollector{count: count, clk: clk, log: log, desc: prometheus.NewDesc("mcpgrain_live_handles",
		"Live server-minted handles (the SDK's NewHandle) in the store: every node's, so every node of a cluster reports the same value; counted at most every 10 s.", nil, nil)}
}

// countLive counts the rows of the handles index.
func countLive(st store.Store) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var n int64
		if err := st.DB().Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM handles`).Scan(&n); err != nil {
			return 0, fmt.Errorf("handle: count live handles: %w", err)
		}
		return n, nil
	}
}

// Describe implements prometheus.Collector.
func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A store that does not answer
// leaves the gauge out of the scrape.
func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if c.at.IsZero() || now.Sub(c.at) >= liveCountEvery || now.Before(c.at) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := c.count(ctx)
		cancel()
		if err != nil {
			c.log.Warn("handle: count the live handles for the metrics", "err", err)
			return
		}
		c.at, c.last = now, n
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.last))
}

type toolKey struct{}

// withTool notes in ctx the tool a tools/call calls (Middleware), for
// Mint: the request itself (a pointer in the context's value, where the
// name, a string, was boxed: one object a call fewer).
func withTool(ctx context.Context, req any) context.Context {
	if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil {
		return context.WithValue(ctx, toolKey{}, ctr)
	}
	return ctx
}

// toolOf is the tool ctx's request calls ("": not a tools/call).
func toolOf(ctx context.Context) string {
	if ctr, ok := ctx.Value(toolKey{}).(*mcp.CallToolRequest); ok && ctr.Params != nil {
		return ctr.Params.Name
	}
	return ""
}

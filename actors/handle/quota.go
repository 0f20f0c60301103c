package handle

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// QuotaKindName is the grain kind that counts a principal's live handles.
const QuotaKindName = "handle-quota"

// DefaultMaxPerPrincipal is the default cap on a principal's live handles.
const DefaultMaxPerPrincipal = 1000

// PendingGrace is how long a mint may take between counting its handle
// and confirming the handle's creation: a pending entry older than this
// is a mint that failed in between, reclaimed when the principal is at
// its cap.
const PendingGrace = time.Minute

// ErrTooManyHandles is the answer of a mint by a principal that has the
// node's --max-handles-per-principal live handles already.
var ErrTooManyHandles = app.ErrTooManyHandles

// QuotaAdd decides a mint's count of handle id among a principal's live
// handles, at now, under limit: a handle counted already is accepted as
// it is (a retry); otherwise, at the limit, pending entries older than
// PendingGrace are reclaimed first, and the handle is added (pending)
// only below the limit. It returns the entries afterwards and whether the
// handle is counted.
func QuotaAdd(live []*pb.HandleQuotaEntry, id string, limit int, now time.Time) ([]*pb.HandleQuotaEntry, bool) {
	if slices.ContainsFunc(live, func(e *pb.HandleQuotaEntry) bool { return e.GetHandle() == id }) {
		return live, true
	}
	if len(live) >= limit {
		live = slices.DeleteFunc(slices.Clone(live), func(e *pb.HandleQuotaEntry) bool {
			return e.GetPending() && now.Sub(time.UnixMilli(e.GetAddedAtMs())) >= PendingGrace
		})
	}
	if len(live) >= limit {
		return live, false
	}
	return append(slices.Clone(live), &pb.HandleQuotaEntry{Handle: id, AddedAtMs: now.UnixMilli(), Pending: true}), true
}

// quotaID is the identity of p's quota grain: injective in (org, user).
func quotaID(p *pb.Principal) string {
	return strconv.Itoa(len(p.GetOrg())) + ":" + p.GetOrg() + "/" + p.GetUser()
}

// quotaGrain is one activation of a principal's handle quota.
type quotaGrain struct {
	h   *Host
	rec *pb.HandleQuotaRecord
}

// Activate implements grain.Grain.
func (q *quotaGrain) Activate(_ context.Context, _ grain.Context, record []byte) error {
	q.rec = &pb.HandleQuotaRecord{}
	if record == nil {
		return nil
	}
	if err := proto.Unmarshal(record, q.rec); err != nil {
		return fmt.Errorf("handle-quota: decode record: %w", err)
	}
	return nil
}

// Deactivate implements grain.Grain.
func (q *quotaGrain) Deactivate(context.Context, grain.Context, grain.Reason) {}

// Receive implements grain.Grain.
func (q *quotaGrain) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	live := q.rec.GetLive()
	switch m := msg.(type) {
	case *pb.HandleQuotaAdd:
		next, ok := QuotaAdd(live, m.GetHandle(), int(m.GetCap()), q.h.now())
		if len(next) == len(live) && (!ok || slices.Equal(next, live)) {
			return &pb.HandleQuotaReply{Refused: !ok, Live: uint32(len(live))}, nil // nothing changed
		}
		if !ok { // refused, but stale pending entries were reclaimed
			if err := q.save(ctx, g, next); err != nil {
				return nil, err
			}
			return &pb.HandleQuotaReply{Refused: true, Live: uint32(len(next))}, nil
		}
		return q.reply(ctx, g, next)
	case *pb.HandleQuotaConfirm:
		i := slices.IndexFunc(live, func(e *pb.HandleQuotaEntry) bool { return e.GetHandle() == m.GetHandle() })
		if i < 0 || !live[i].GetPending() {
			return &pb.HandleQuotaReply{Live: uint32(len(live))}, nil
		}
		next := slices.Clone(live)
		next[i] = &pb.HandleQuotaEntry{Handle: live[i].GetHandle(), AddedAtMs: live[i].GetAddedAtMs()}
		return q.reply(ctx, g, next)
	case *pb.HandleQuotaRemove:
		next := slices.DeleteFunc(slices.Clone(live), func(e *pb.HandleQuotaEntry) bool { return e.GetHandle() == m.GetHandle() })
		if len(next) == len(live) {
			return &pb.HandleQuotaReply{Live: uint32(len(live))}, nil
		}
		return q.reply(ctx, g, next)
	default:
		return nil, grain.Reject("handle-quota: unsupported request %T", msg)
	}
}

// reply saves live and answers its count.
func (q *quotaGrain) reply(ctx context.Context, g grain.Context, live []*pb.HandleQuotaEntry) (proto.Message, error) {
	if err := q.save(ctx, g, live); err != nil {
		return nil, err
	}
	return &pb.HandleQuotaReply{Live: uint32(len(live))}, nil
}

// save stores live, fenced (none left: the grain's row is deleted).
func (q *quotaGrain) save(ctx context.Context, g grain.Context, live []*pb.HandleQuotaEntry) error {
	if len(live) == 0 {
		if err := g.Delete(ctx); err != nil {
			return fmt.Errorf("handle-quota: delete: %w", err)
		}
		q.rec = &pb.HandleQuotaRecord{}
		return nil
	}
	rec := &pb.HandleQuotaRecord{Live: live}
	b, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("handle-quota: encode record: %w", err)
	}
	if err := g.Save(ctx, b); err != nil {
		return fmt.Errorf("handle-quota: save: %w", err)
	}
	q.rec = rec
	return nil
}

// QuotaKind is the handle-quota grain kind (hosted with [Host.Kind]).
func (h *Host) QuotaKind() grain.Kind {
	return grain.Kind{
		Name:           QuotaKindName,
		New:            func(string) grain.Grain { return &quotaGrain{h: h} },
		IdleTimeout:    5 * time.Minute,
		CreatedByWrite: true,
	}
}

// quota sends msg to p's quota grain.
func (h *Host) quota(ctx context.Context, p *pb.Principal, msg proto.Message) (*pb.HandleQuotaReply, error) {
	res, err := h.cfg.Cluster.Request(ctx, QuotaKindName, quotaID(p), msg)
	if err != nil {
		return nil, fmt.Errorf("mcpgrain: handle quota: %w (%w)", app.ErrRetry, err)
	}
	r, ok := res.(*pb.HandleQuotaReply)
	if !ok {
		return nil, fmt.Errorf("mcpgrain: handle quota: unexpected reply %T", res)
	}
	return r, nil
}

// limited reports whether handles are capped per principal.
func (h *Host) limited() bool { return h.cfg.MaxPerPrincipal > 0 }

// count counts id among p's live handles before it is created.
func (h *Host) count(ctx context.Context, p *pb.Principal, id string) error {
	if !h.limited() {
		return nil
	}
	r, err := h.quota(ctx, p, &pb.HandleQuotaAdd{Handle: id, Cap: uint32(min(h.cfg.MaxPerPrincipal, math.MaxUint32))})
	if err != nil {
		return err
	}
	if r.GetRefused() {
		h.metrics.handles.WithLabelValues(outcomeRefused).Inc()
		return fmt.Errorf("%w: %d live handles (--max-handles-per-principal)", app.ErrTooManyHandles, r.GetLive())
	}
	return nil
}

// uncount removes id from p's live handles (dropped, expired, or not
// created): the handle grain calls it before it deletes itself, so a
// failure leaves the handle in place to be dropped or expired again.
func (h *Host) uncount(ctx context.Context, p *pb.Principal, id string) error {
	if !h.limited() {
		return nil
	}
	_, err := h.quota(ctx, p, &pb.HandleQuotaRemove{Handle: id})
	return err
}

// confirm marks id created among p's live handles; a failure is logged:
// the entry stays pending, and may be reclaimed at the cap after
// PendingGrace (the principal then has one handle more than counted,
// until it is dropped or expires).
func (h *Host) confirm(ctx context.Context, p *pb.Principal, id string) {
	if !h.limited() {
		return
	}
	if _, err := h.quota(context.WithoutCancel(ctx), p, &pb.HandleQuotaConfirm{Handle: id}); err != nil {
		h.cfg.Logger.Warn("handle not confirmed in its principal's quota", "handle", id, "err", err)
	}
}

package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkResidentHeap measures the live heap a resident session holds:
// b.N sessions are created (raw Streamable HTTP, 16 workers) on an
// in-process mcpgrain node (SQLite, every session resident: the soft cap
// above b.N) and on the plain go-sdk server, one after the other in this
// process, and this process's heap after full collections is compared
// before and after (each in a process of its own for exact figures: see
// the loop below). It reports live-B/session and objects/session (the
// client's ~60 bytes a session id included, on both sides) and logs the
// heap sites that grew most per session (`-v`). Run it with the session
// count as the benchmark time:
//
//	go test -run '^$' -bench ResidentHeap -benchtime 2000x -v ./internal/bench
//
// MCPGRAIN_HEAP_PROFILE_RATE sets runtime.MemProfileRate for the sites
// (default 512 bytes, estimates scaled as pprof does; 1 records every
// allocation). MCPGRAIN_HEAP_PROFILE_DIR, if set, receives a heap profile
// per target taken before and after the creations (`go tool pprof
// -sample_index inuse_space -diff_base mcpgrain.before.heap.pprof
// mcpgrain.after.heap.pprof`).
func BenchmarkResidentHeap(b *testing.B) {
	rate := 512
	if v, err := strconv.Atoi(os.Getenv("MCPGRAIN_HEAP_PROFILE_RATE")); err == nil && v > 0 {
		rate = v
	}
	runtime.MemProfileRate = rate
	// The baseline first: what a stopped node leaves reachable for a
	// while (tens of MB after 20,000 sessions) is collected during the
	// next target's creations and would hide that much of its growth.
	// For exact figures run each target in a process of its own
	// (-bench ResidentHeap/mcpgrain, then ResidentHeap/baseline).
	for _, name := range []string{"baseline", "mcpgrain"} {
		b.Run(name, func(b *testing.B) {
			if b.N < minHeapSessions {
				// The probe round (b.N 1) or too few sessions to tell:
				// -benchtime 2000x or more.
				return
			}
			m := measureResidentHeap(b, name, b.N)
			b.ReportMetric(m.bytes, "live-B/session")
			b.ReportMetric(m.objects, "objects/session")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d sessions, live heap %.0f B and %.1f objects a session; sites grown most (profile rate %d):\n%s",
				name, b.N, m.bytes, m.objects, rate, formatSites(m.sites, b.N, 25))
		})
	}
}

// heapGrowth is what the live heap grew by per session, with its sites.
type heapGrowth struct {
	bytes, objects float64
	sites          []heapSite
}

// measureResidentHeap creates n sessions on a fresh target (after a
// warm-up of 200, which the node's and go-sdk's pools and maps absorb).
func measureResidentHeap(b *testing.B, name string, n int) heapGrowth {
	ctx := context.Background()
	const conc, warm = 16, 200
	var t *target
	var err error
	if name == "mcpgrain" {
		t, err = startNode(ctx, NodeOptions{SoftCap: n + 2*warm}, conc)
	} else {
		t, err = startBaseline(ctx, false, conc)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer t.close()
	o := Options{Concurrency: conc, ProgressEvery: time.Hour, RequestTimeout: time.Minute}
	c := &rawClient{hc: t.hc}
	if ws, _ := createSessions(ctx, o, c, []string{t.endpoint}, warm, 0, name); len(ws) != warm {
		b.Fatalf("%s: %d of %d warm-up sessions created", name, len(ws), warm)
	}
	b.ResetTimer()
	h0, o0, p0 := liveHeapObjects()
	writeHeapProfile(b, name+".before")
	sessions, d := createSessions(ctx, o, c, []string{t.endpoint}, n, 0, name)
	h1, o1, p1 := liveHeapObjects()
	b.StopTimer()
	if len(sessions) != n {
		b.Fatalf("%s: %d of %d sessions created, errors %v", name, len(sessions), n, d.kinds)
	}
	writeHeapProfile(b, name+".after")
	runtime.KeepAlive(sessions)
	if h1 <= h0 {
		b.Fatalf("%s: the live heap did not grow (%d → %d bytes)", name, h0, h1)
	}
	return heapGrowth{
		bytes:   float64(h1-h0) / float64(n),
		objects: float64(int64(o1)-int64(o0)) / float64(n),
		sites:   diffSites(p0, p1),
	}
}

// writeHeapProfile writes the heap profile (as of the last collection)
// to MCPGRAIN_HEAP_PROFILE_DIR/name.heap.pprof, if that is set.
func writeHeapProfile(b *testing.B, name string) {
	dir := os.Getenv("MCPGRAIN_HEAP_PROFILE_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name+".heap.pprof"))
	if err != nil {
		b.Fatal(err)
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
}

// liveHeapObjects is liveHeap with the live object count and the heap
// profile's records (current as of the last of the collections).
func liveHeapObjects() (bytes, objects uint64, profile []runtime.MemProfileRecord) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	n, _ := runtime.MemProfile(nil, false)
	for {
		profile = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(profile, false); ok {
			return m.HeapAlloc, m.HeapObjects, profile[:n]
		}
	}
}

// heapSite is the in-use growth attributed to one allocation site.
type heapSite struct {
	site           string
	bytes, objects float64
}

// diffSites is the growth of in-use bytes and objects from before to
// after, per site (siteOf), largest first; sampled records are scaled
// up as pprof scales them.
func diffSites(before, after []runtime.MemProfileRecord) []heapSite {
	rate := float64(runtime.MemProfileRate)
	sum := func(recs []runtime.MemProfileRecord, sign float64, into map[string]*heapSite) {
		for _, r := range recs {
			objs, bytes := float64(r.InUseObjects()), float64(r.InUseBytes())
			if objs == 0 {
				continue
			}
			if rate > 1 {
				scale := 1 / (1 - math.Exp(-bytes/objs/rate))
				objs, bytes = objs*scale, bytes*scale
			}
			key := siteOf(r.Stack())
			s := into[key]
			if s == nil {
				s = &heapSite{site: key}
				into[key] = s
			}
			s.bytes += sign * bytes
			s.objects += sign * objs
		}
	}
	m := map[string]*heapSite{}
	sum(before, -1, m)
	sum(after, 1, m)
	out := make([]heapSite, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b heapSite) int { return cmp.Compare(b.bytes, a.bytes) })
	return out
}

// siteOf names an allocation's site: its innermost frame outside the
// runtime and the standard library's containers, then the innermost
// frame in mcpgrain's own code (after " ← "), when they differ.
func siteOf(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	var leaf, ours string
	for {
		f, more := frames.Next()
		fn := f.Function
		if leaf == "" && !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") {
			leaf = shortFunc(fn)
		}
		if strings.HasPrefix(fn, "github.com/mcpgrain/mcpgrain/") {
			ours = shortFunc(fn)
			break
		}
		if !more {
			break
		}
	}
	if ours == "" || ours == leaf {
		return leaf
	}
	return leaf + " ← " + ours
}

// shortFunc drops a function name's module path prefix.
func shortFunc(fn string) string {
	for _, p := range []string{"github.com/mcpgrain/mcpgrain/", "github.com/modelcontextprotocol/go-sdk/", "github.com/asynkron/protoactor-go/"} {
		if s, ok := strings.CutPrefix(fn, p); ok {
			return s
		}
	}
	return fn
}

// formatSites lists the top sites per session.
func formatSites(sites []heapSite, n, top int) string {
	var sb strings.Builder
	for i, s := range sites {
		if i == top || s.bytes/float64(n) < 8 {
			break
		}
		fmt.Fprintf(&sb, "  %7.0f B %5.1f obj  %s\n", s.bytes/float64(n), s.objects/float64(n), s.site)
	}
	return sb.String()
}

package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Distribution is how the scale scenario's revisits pick the session
// they revisit.
type Distribution string

// The revisit distributions.
const (
	// DistUniform picks every session with the same probability.
	DistUniform Distribution = "uniform"
	// DistZipf picks the session of rank k (a seeded random permutation
	// of the sessions) with probability proportional to 1/(v+k)^s: most
	// revisits go to a few hot sessions, the long tail is rarely seen —
	// and when it is, usually passivated, so a restore.
	DistZipf Distribution = "zipf"
)

// The Zipf parameters and seed the scale scenario uses when unset.
const (
	DefaultZipfS    = 1.1
	DefaultZipfV    = 1.0
	DefaultZipfSeed = 1
)

// picker picks session indexes in [0, n) by a distribution, from a seeded
// generator: the same seed picks the same sequence. It is safe for
// concurrent use (the order among concurrent callers is theirs).
type picker struct {
	mu       sync.Mutex
	r        *rand.Rand
	zipf     *rand.Zipf // nil: uniform
	perm     []int32    // rank → session index (Zipf only)
	n        int
	seen     []uint64 // bitmap of the indexes picked
	distinct int
}

// newPicker returns a picker over n sessions. s and v are the Zipf
// parameters (s > 1, v ≥ 1), ignored for DistUniform.
func newPicker(d Distribution, n int, s, v float64, seed uint64) (*picker, error) {
	if n < 1 {
		return nil, fmt.Errorf("no sessions to pick from")
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &picker{r: r, n: n, seen: make([]uint64, (n+63)/64)}
	switch d {
	case DistUniform:
	case DistZipf:
		if !(s > 1) || !(v >= 1) {
			return nil, fmt.Errorf("zipf needs s > 1 and v ≥ 1 (got s=%g, v=%g)", s, v)
		}
		p.zipf = rand.NewZipf(r, s, v, uint64(n-1))
		p.perm = make([]int32, n)
		for i := range p.perm {
			p.perm[i] = int32(i)
		}
		r.Shuffle(n, func(i, j int) { p.perm[i], p.perm[j] = p.perm[j], p.perm[i] })
	default:
		return nil, fmt.Errorf("unknown distribution %q (want uniform or zipf)", d)
	}
	return p, nil
}

// next picks a session index.
func (p *picker) next() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var i int
	if p.zipf == nil {
		i = p.r.IntN(p.n)
	} else {
		i = int(p.perm[p.zipf.Uint64()])
	}
	if w, bit := i/64, uint64(1)<<(i%64); p.seen[w]&bit == 0 {
		p.seen[w] |= bit
		p.distinct++
	}
	return i
}

// Distinct is how many different sessions the picker has picked.
func (p *picker) Distinct() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.distinct
}

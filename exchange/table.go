package exchange

import (
	"hash/maphash"
	"sync"
)

// Table holds a node's exchanges in flight by id: the gateway's response
// streams (by exchange id), a runtime's POST exchanges (by token). A map
// in shards, each under its own lock; the zero Table is empty and ready.
//
// Not a sync.Map: its Store boxes the string key and allocates a node of
// its trie, two objects for every exchange, where a Go map's insert into a
// slot a deletion freed allocates nothing. A Go map does not shrink: each
// shard keeps room for the most exchanges it held at once (a node's, not a
// session's).
type Table[V any] struct {
	shards [tableShards]tableShard[V]
}

// tableShards spreads the locks of a node's cores over shards: exchange
// ids are random and tokens sequential, both hash well.
const tableShards = 16

// tableShard is one lock and its map, padded to its own cache line.
type tableShard[V any] struct {
	mu sync.Mutex
	m  map[string]V
	_  [48]byte
}

// tableSeed hashes keys to shards.
var tableSeed = maphash.MakeSeed()

func (t *Table[V]) shard(key string) *tableShard[V] {
	return &t.shards[maphash.String(tableSeed, key)%tableShards]
}

// Store sets key's value.
func (t *Table[V]) Store(key string, v V) {
	s := t.shard(key)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]V)
	}
	s.m[key] = v
	s.mu.Unlock()
}

// Load returns key's value, if it has one.
func (t *Table[V]) Load(key string) (v V, ok bool) {
	s := t.shard(key)
	s.mu.Lock()
	v, ok = s.m[key]
	s.mu.Unlock()
	return v, ok
}

// Delete removes key's value.
func (t *Table[V]) Delete(key string) {
	s := t.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// Len is how many values t holds.
func (t *Table[V]) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

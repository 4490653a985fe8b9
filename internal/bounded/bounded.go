// Package bounded is a map of what a process computed once, safe for
// concurrent use and bounded: past its limit it starts again, so keys a
// user's input makes up, or a long process's new ones, cannot grow it
// without end.
package bounded

import "sync"

// Map holds at most Limit values by key; the zero Map with a Limit set is
// ready to use.
type Map[K comparable, V any] struct {
	Limit int

	mu sync.Mutex
	m  map[K]V
}

// Get is the value kept for key.
func (b *Map[K, V]) Get(key K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[key]
	return v, ok
}

// Put keeps v for key, emptying the map first when it holds Limit values.
func (b *Map[K, V]) Put(key K, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil || len(b.m) >= b.Limit {
		b.m = map[K]V{}
	}
	b.m[key] = v
}

// Len is how many values it holds.
func (b *Map[K, V]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}

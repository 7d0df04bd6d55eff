package memstore

import "unsafe"

// A memo remembers where the counters of the keys used lately live, so
// that a request finds them without hashing its bucket names into the
// state's maps again: a reservation and its settlement read and write
// each of a request's five to seven buckets some four times, and those
// map look-ups (two strings hashed for a ceiling) were a third of the
// store's work.
//
// A key is found by the identity of its strings: every request names a
// bucket by the same string (its limit's Bucket) and a period by the
// string budget.PeriodID hands out again, so their bytes sit at the same
// address. Strings do not change, so two of the same address and length
// are equal; a key held in a slot keeps its bytes from being reused. A
// key met under another address (a new string of the same name) misses
// and is looked up in the map, as before.
type memo[V any] struct {
	slots [1 << memoBits]memoSlot[V]
}

const memoBits = 8

type memoSlot[V any] struct {
	bucket, period string
	v              *V
}

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// index is the first slot of (bucket, period)'s pair: Fibonacci hashing
// of the two addresses, whose low bits, alike for strings of one size
// class, do not pick it alone.
func (m *memo[V]) index(bucket, period string) int {
	h := (uint64(uintptr(unsafe.Pointer(unsafe.StringData(bucket))))*0x9E3779B97F4A7C15 + uint64(uintptr(unsafe.Pointer(unsafe.StringData(period))))) * 0x9E3779B97F4A7C15
	return int(h >> (64 - memoBits))
}

// get is the counter remembered for (bucket, period), or nil. A key is in
// one of a pair of slots (i and i^1): a request's few keys rarely need
// more.
func (m *memo[V]) get(bucket, period string) *V {
	i := m.index(bucket, period)
	if s := &m.slots[i]; sameString(s.bucket, bucket) && sameString(s.period, period) {
		return s.v
	}
	if s := &m.slots[i^1]; sameString(s.bucket, bucket) && sameString(s.period, period) {
		return s.v
	}
	return nil
}

func (m *memo[V]) put(bucket, period string, v *V) {
	i := m.index(bucket, period)
	if m.slots[i].v != nil && m.slots[i^1].v == nil {
		i ^= 1
	}
	m.slots[i] = memoSlot[V]{bucket, period, v}
}

// forget drops every slot: a counter left its map.
func (m *memo[V]) forget() { *m = memo[V]{} }

// cell is the counter of key in cells, found through m; create says
// whether a missing one is made (else nil is returned for it).
func cell[K comparable, V any](cells map[K]*V, m *memo[V], key K, bucket, period string, create bool) *V {
	if v := m.get(bucket, period); v != nil {
		return v
	}
	v := cells[key]
	if v == nil {
		if !create {
			return nil
		}
		v = new(V)
		cells[key] = v
	}
	m.put(bucket, period, v)
	return v
}

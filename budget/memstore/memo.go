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
	slots [32]memoSlot[V]
}

type memoSlot[V any] struct {
	bucket, period string
	v              *V
}

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

func (m *memo[V]) slot(bucket, period string) *memoSlot[V] {
	h := uintptr(unsafe.Pointer(unsafe.StringData(bucket)))>>3 ^ uintptr(unsafe.Pointer(unsafe.StringData(period)))>>2
	return &m.slots[h%uintptr(len(m.slots))]
}

// get is the counter remembered for (bucket, period), or nil.
func (m *memo[V]) get(bucket, period string) *V {
	if s := m.slot(bucket, period); sameString(s.bucket, bucket) && sameString(s.period, period) {
		return s.v
	}
	return nil
}

func (m *memo[V]) put(bucket, period string, v *V) {
	*m.slot(bucket, period) = memoSlot[V]{bucket, period, v}
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

package tokenizer

import (
	"hash/maphash"
	"math/bits"
)

// rankTable maps a token's bytes to its rank, like the map[string]int the
// ranks are loaded as, without a pointer: one string holds every token's
// bytes and an open-addressed table of plain integers finds them. A map of
// 200,000 strings is 200,000 objects the garbage collector marks at every
// cycle — in a gateway that allocates a few kilobytes a request, more
// instructions than the request itself —; this is three objects, two of
// them never scanned.
type rankTable struct {
	data  string
	slots []rankSlot
	mask  uint64
	seed  maphash.Seed
}

// rankSlot is one token: its bytes data[off:off+n] and its rank; n == 0
// is an empty slot (no token is empty). tag is the hash's top bits, to
// pass over most other tokens without comparing bytes.
type rankSlot struct {
	off  uint32
	rank uint32
	n    uint16
	tag  uint16
}

func newRankTable(ranks map[string]int) *rankTable {
	size := 0
	for tok := range ranks {
		size += len(tok)
	}
	// Under half full: a miss (most look-ups of merging miss) ends at the
	// first empty slot after a probe or two.
	n := uint64(1) << bits.Len(uint(2*len(ranks)))
	t := &rankTable{slots: make([]rankSlot, n), mask: n - 1, seed: maphash.MakeSeed()}
	data := make([]byte, 0, size)
	for tok, r := range ranks {
		if len(tok) == 0 || len(tok) > 1<<16-1 {
			continue // neither exists in tiktoken's files
		}
		h := maphash.String(t.seed, tok)
		i := h & t.mask
		for t.slots[i].n != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = rankSlot{off: uint32(len(data)), rank: uint32(r), n: uint16(len(tok)), tag: uint16(h >> 48)}
		data = append(data, tok...)
	}
	t.data = string(data)
	return t
}

// rank returns the rank of the token s, if s is one.
func (t *rankTable) rank(s string) (int, bool) {
	h := maphash.String(t.seed, s)
	tag := uint16(h >> 48)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := &t.slots[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.tag == tag && int(sl.n) == len(s) && t.data[sl.off:sl.off+uint32(sl.n)] == s {
			return int(sl.rank), true
		}
	}
}

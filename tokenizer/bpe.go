package tokenizer

import (
	"hash/maphash"
	"math"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"
)

// fast counts tokens of o200k_base or cl100k_base without tiktoken-go's
// regex: the hand-written pre-tokenizer, one rank look-up per piece that
// is a token, byte-pair merging (tiktoken's algorithm, counting only) for
// the rest, whose counts are cached piece by piece — most pieces of a
// language repeat —, and long texts cut at line starts and counted on
// every core.
type fast struct {
	ranks  *rankTable
	next   func(sc scanner, i int) int
	pieces *pieceCache
}

func newFast(encoding string, ranks map[string]int) *fast {
	f := &fast{ranks: newRankTable(ranks), pieces: newPieceCache()}
	switch encoding {
	case "o200k_base":
		f.next = scanner.nextO200k
	case "cl100k_base":
		f.next = scanner.nextCl100k
	default:
		return nil
	}
	return f
}

// parallelAbove is the length from which a text is counted on every core.
const parallelAbove = 64 << 10

// count returns the number of tokens of s, as tiktoken's EncodeOrdinary.
func (f *fast) count(s string) int64 {
	if !utf8.ValidString(s) {
		s = asRunes(s)
	}
	workers := runtime.GOMAXPROCS(0)
	if len(s) < parallelAbove || workers < 2 {
		return f.countRange(s)
	}
	parts := cut(s, workers)
	counts := make([]int64, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { counts[i] = f.countRange(p) })
	}
	wg.Wait()
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// countRange counts the pieces of s.
func (f *fast) countRange(s string) int64 {
	sc := scanner{s}
	var n int64
	for i := 0; i < len(s); {
		e := f.next(sc, i)
		n += f.piece(s[i:e])
		i = e
	}
	return n
}

// piece is the token count of one piece.
func (f *fast) piece(p string) int64 {
	if _, ok := f.ranks.rank(p); ok {
		return 1
	}
	if n, ok := f.pieces.get(p); ok {
		return n
	}
	n := int64(mergeCount(p, f.ranks))
	f.pieces.put(p, n)
	return n
}

// cut splits s into about n parts at line starts that begin a piece in
// both encodings: after a '\n' and before a rune that is not white space
// (no piece runs across such a point), so the parts' counts add up to the
// whole's.
func cut(s string, n int) []string {
	var parts []string
	size := len(s) / n
	for len(s) > 0 && len(parts) < n-1 {
		at := -1
		for i := size; i < len(s); {
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			if i < len(s) {
				_, c, _ := scanner{s}.at(i)
				if c&cS == 0 {
					at = i
					break
				}
			}
		}
		if at < 0 {
			break
		}
		parts = append(parts, s[:at])
		s = s[at:]
	}
	return append(parts, s)
}

// asRunes replaces each byte of s that is not UTF-8 with U+FFFD, as
// tiktoken-go's conversion to runes does before it splits.
func asRunes(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// mergeCount is how many tokens byte-pair merging makes of piece: the
// lowest-ranked adjacent pair is merged until no pair is a token — the
// algorithm of tiktoken (and tiktoken-go's bytePairMerge), counting.
func mergeCount(piece string, ranks *rankTable) int {
	type part struct{ start, rank int }
	var stack [64]part
	parts := stack[:0]
	if len(piece)+1 > len(stack) {
		parts = make([]part, 0, len(piece)+1)
	}
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{i, math.MaxInt})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := ranks.rank(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		min, at := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < min {
				min, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = rank(at, 1)
		if at > 0 {
			parts[at-1].rank = rank(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// pieceCache maps pieces that are not one token to their counts, shared
// by every request: a word split into three tokens is split once. Sharded
// to keep cores apart; each shard is dropped when full (a bound on memory,
// not an LRU: the next texts fill it again with what they use).
type pieceCache struct {
	shards [64]pieceShard
}

type pieceShard struct {
	mu sync.RWMutex
	m  map[string]int64
}

// pieceShardMax bounds a shard: 64 × 8,192 pieces of a few bytes each.
const pieceShardMax = 8192

var pieceSeed = maphash.MakeSeed()

func newPieceCache() *pieceCache { return &pieceCache{} }

func (c *pieceCache) shard(p string) *pieceShard {
	return &c.shards[maphash.String(pieceSeed, p)&63]
}

func (c *pieceCache) get(p string) (int64, bool) {
	sh := c.shard(p)
	sh.mu.RLock()
	n, ok := sh.m[p]
	sh.mu.RUnlock()
	return n, ok
}

func (c *pieceCache) put(p string, n int64) {
	if len(p) > 256 {
		return // a rare long piece: not worth a slot
	}
	sh := c.shard(p)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= pieceShardMax {
		sh.m = make(map[string]int64, 256)
	}
	sh.m[strings.Clone(p)] = n
	sh.mu.Unlock()
}

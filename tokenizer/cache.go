package tokenizer

import "sync"

// defaultCacheEntries bounds the count cache: two generations of this many
// entries, 16 bytes each, about 2 MiB per encoding in all.
const defaultCacheEntries = 1 << 16

// countCache maps a content hash to its token count. It keeps two
// generations: look-ups that hit the old one move the entry to the new one,
// and when the new one is full the old one is dropped. That keeps recently
// used conversations at a fraction of an LRU's bookkeeping.
type countCache struct {
	mu       sync.Mutex
	max      int
	cur, old map[uint64]int64
}

func newCountCache(max int) *countCache {
	return &countCache{max: max, cur: make(map[uint64]int64, max)}
}

func (c *countCache) get(h uint64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.cur[h]; ok {
		return n, true
	}
	if n, ok := c.old[h]; ok {
		c.putLocked(h, n)
		return n, true
	}
	return 0, false
}

func (c *countCache) put(h uint64, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(h, n)
}

func (c *countCache) putLocked(h uint64, n int64) {
	if len(c.cur) >= c.max {
		c.old, c.cur = c.cur, make(map[uint64]int64, c.max)
	}
	c.cur[h] = n
}

// Package topk finds the most frequent keys of a stream in bounded memory:
// the Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005). It keeps
// k counters; a new key takes the smallest one's place, inheriting its
// count as its possible overcount. Every key seen more than n/k times in n
// additions is among the k kept, and each kept count is at most Err above
// the truth — so the top of the list is right even when most keys are
// seen once, as the key ids of a credential-stuffing run would be.
package topk

import (
	"container/heap"
	"slices"
	"strings"
	"sync"
)

// Entry is a key with its count: Count - Err ≤ true count ≤ Count.
type Entry struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Err   int64  `json:"overcount_at_most"`
}

// Sketch is a Space-Saving summary of capacity k; safe for concurrent use.
type Sketch struct {
	mu    sync.Mutex
	k     int
	index map[string]*slot
	heap  slots // min-heap by count
	total int64
}

type slot struct {
	Entry
	at int // position in the heap
}

// New returns a sketch keeping k counters (k ≥ 1).
func New(k int) *Sketch {
	k = max(k, 1)
	return &Sketch{k: k, index: make(map[string]*slot, k)}
}

// Add counts key once.
func (s *Sketch) Add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	if sl, ok := s.index[key]; ok {
		sl.Count++
		heap.Fix(&s.heap, sl.at)
		return
	}
	if len(s.heap) < s.k {
		sl := &slot{Entry: Entry{Key: key, Count: 1}}
		s.index[key] = sl
		heap.Push(&s.heap, sl)
		return
	}
	// The smallest counter goes to the new key, its count the new key's
	// overcount bound.
	sl := s.heap[0]
	delete(s.index, sl.Key)
	sl.Key, sl.Err = key, sl.Count
	sl.Count++
	s.index[key] = sl
	heap.Fix(&s.heap, 0)
}

// Top returns up to n entries, largest count first (ties by key).
func (s *Sketch) Top(n int) []Entry {
	s.mu.Lock()
	out := make([]Entry, 0, len(s.heap))
	for _, sl := range s.heap {
		out = append(out, sl.Entry)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(n, len(out))]
}

// Total is how many times Add was called.
func (s *Sketch) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

type slots []*slot

func (h slots) Len() int           { return len(h) }
func (h slots) Less(i, j int) bool { return h[i].Count < h[j].Count }
func (h slots) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *slots) Push(x any) {
	sl := x.(*slot)
	sl.at = len(*h)
	*h = append(*h, sl)
}
func (h *slots) Pop() any {
	old := *h
	sl := old[len(old)-1]
	*h = old[:len(old)-1]
	return sl
}

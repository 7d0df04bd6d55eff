package gateway

import (
	"sync"
	"sync/atomic"
)

// settler runs settlements after their handlers have returned, on
// long-lived workers: a goroutine per settlement would start each one on a
// small stack and copy it as the settlement grows it (about 30 k
// instructions a request under callgrind). A burst beyond the workers
// and their queue gets goroutines of its own rather than waiting.
type settler struct {
	mu      sync.Mutex
	queue   chan func()
	drained bool
	pending sync.WaitGroup // settlements not yet done
	n       atomic.Int64   // the same, counted
	workers sync.WaitGroup
}

// settleWorkers is how many settlements run at once before a burst spills
// into goroutines of its own: enough for concurrent Redis settlements to
// share a pipeline (budget/redisstore/batch.go).
const settleWorkers = 64

// run runs f on a worker; after drain, on the caller's goroutine.
func (s *settler) run(f func()) {
	s.mu.Lock()
	if s.drained {
		s.mu.Unlock()
		f()
		return
	}
	if s.queue == nil {
		q := make(chan func(), 4*settleWorkers)
		s.queue = q
		for range settleWorkers {
			s.workers.Go(func() {
				for f := range q {
					f()
					s.done()
				}
			})
		}
	}
	s.pending.Add(1)
	s.n.Add(1)
	q := s.queue
	s.mu.Unlock()
	select {
	case q <- f:
	default:
		go func() {
			defer s.done()
			f()
		}()
	}
}

func (s *settler) done() {
	s.n.Add(-1)
	s.pending.Done()
}

// drain waits for every settlement handed to run and stops the workers;
// later settlements run on their callers.
func (s *settler) drain() {
	s.mu.Lock()
	s.drained = true
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.pending.Wait()
	if q != nil {
		close(q)
		s.workers.Wait()
	}
}

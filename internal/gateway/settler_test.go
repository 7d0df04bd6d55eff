package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Settlements handed over, more at once than workers and queue hold, all
// run, drain waits for every one, and one handed over after drain runs on
// its caller.
func TestSettlerRunsEverySettlementAndDrainWaits(t *testing.T) {
	var s settler
	var done atomic.Int64
	release := make(chan struct{})
	var handed sync.WaitGroup
	const n = 10 * settleWorkers
	for range n {
		handed.Go(func() {
			s.run(func() {
				<-release // every worker busy: the queue fills, then goroutines of their own
				done.Add(1)
			})
		})
	}
	handed.Wait()
	close(release)
	s.drain()
	if got := done.Load(); got != n {
		t.Fatalf("drain returned with %d of %d settlements done", got, n)
	}
	ran := false
	s.run(func() { ran = true })
	if !ran {
		t.Fatal("a settlement after drain did not run on its caller")
	}
}

package queue

import (
	"context"
	"sync"
	"time"
)

// Clock is the time source of a Queue: time.Now and time.AfterFunc in
// production, a fake in tests.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) interface{ Stop() bool }
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	return time.AfterFunc(d, f)
}

// Queue runs a Core on a clock. It is safe for concurrent use.
type Queue struct {
	clock   Clock
	maxWait time.Duration

	mu    sync.Mutex
	core  *Core
	timer interface{ Stop() bool }
}

// New returns a queue for cfg; a nil clock means the wall clock.
func New(cfg Config, clock Clock) *Queue {
	if clock == nil {
		clock = realClock{}
	}
	cfg.setDefaults()
	return &Queue{clock: clock, core: NewCore(cfg), maxWait: cfg.MaxWait}
}

// Wait blocks until the request may go upstream, then returns the function
// to call when it is done. It fails at once with ErrFull, or with
// ErrDeadline after the maximum wait, or with ctx's error when the client
// goes away; it is then removed from the queue. retryAfter is set on
// ErrFull and ErrDeadline.
func (q *Queue) Wait(ctx context.Context, team string, weight int64) (done func(), retryAfter time.Duration, err error) {
	q.mu.Lock()
	t, err := q.core.Enqueue(q.clock.Now(), team, weight)
	if err != nil {
		ra := q.core.RetryAfter(q.clock.Now())
		q.mu.Unlock()
		return nil, ra, err
	}
	q.pumpLocked()
	q.mu.Unlock()

	expired := make(chan struct{})
	deadline := q.clock.AfterFunc(q.maxWait, func() { close(expired) })
	defer deadline.Stop()
	select {
	case <-t.ready:
		return q.doneFunc(), 0, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = ErrDeadline
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.core.Cancel(t) {
		// Admitted at the same moment: hand the slot back.
		q.core.Done()
		q.pumpLocked()
	}
	return nil, q.core.RetryAfter(q.clock.Now()), err
}

func (q *Queue) doneFunc() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			q.core.Done()
			q.pumpLocked()
			q.mu.Unlock()
		})
	}
}

// pumpLocked admits what can go now and arms the timer for the next slot.
// Requires q.mu.
func (q *Queue) pumpLocked() {
	now := q.clock.Now()
	admitted, wake := q.core.Admit(now)
	for _, t := range admitted {
		close(t.ready)
	}
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	if !wake.IsZero() {
		q.timer = q.clock.AfterFunc(wake.Sub(now), func() {
			q.mu.Lock()
			q.pumpLocked()
			q.mu.Unlock()
		})
	}
}

// Len is the number of requests waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.core.Len()
}

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

// Pacer hands out slots of a drain shared by many gateway instances
// (budget/redisstore's Pace). wait is how long until the slot; a slot beyond
// maxWait is refused with tooFar true and not taken.
type Pacer interface {
	Pace(ctx context.Context, interval, maxWait time.Duration) (wait time.Duration, tooFar bool, err error)
}

// Queue runs a Core on a clock. It is safe for concurrent use.
type Queue struct {
	clock   Clock
	maxWait time.Duration
	// pacer, when set, owns the drain rate (shared across instances);
	// the local core then only keeps fairness, length and concurrency.
	pacer    Pacer
	interval func(weight int64) time.Duration

	mu    sync.Mutex
	core  *Core
	timer interface{ Stop() bool }
}

// New returns a queue for cfg; a nil clock means the wall clock. With a
// pacer, the drain rate (Rate, TokensPerMinute) is the pacer's, shared with
// every instance; without, it is this queue's own.
func New(cfg Config, clock Clock, pacer Pacer) *Queue {
	if clock == nil {
		clock = realClock{}
	}
	cfg.setDefaults()
	q := &Queue{clock: clock, maxWait: cfg.MaxWait, pacer: pacer}
	rated := NewCore(cfg)
	q.interval = rated.interval
	if pacer != nil && (cfg.Rate > 0 || cfg.TokensPerMinute > 0) {
		local := cfg
		local.Rate, local.TokensPerMinute = 0, 0
		q.core = NewCore(local)
	} else {
		q.pacer = nil
		q.core = rated
	}
	return q
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

	start := q.clock.Now()
	expired := make(chan struct{})
	deadline := q.clock.AfterFunc(q.maxWait, func() { close(expired) })
	defer deadline.Stop()
	select {
	case <-t.ready:
		if q.pacer == nil {
			return q.doneFunc(), 0, nil
		}
		done = q.doneFunc()
		if ra, err := q.pace(ctx, weight, q.maxWait-q.clock.Now().Sub(start), expired); err != nil {
			done()
			return nil, ra, err
		}
		return done, 0, nil
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

// pace waits for this request's slot on the shared drain. If the pacer
// cannot be reached the request goes at once: the upstream's own 429 and
// the breaker protect it then.
func (q *Queue) pace(ctx context.Context, weight int64, left time.Duration, expired <-chan struct{}) (time.Duration, error) {
	wait, tooFar, err := q.pacer.Pace(ctx, q.interval(weight), max(left, 0))
	if err != nil {
		return 0, nil
	}
	if tooFar {
		return wait, ErrDeadline
	}
	if wait <= 0 {
		return 0, nil
	}
	slot := make(chan struct{})
	timer := q.clock.AfterFunc(wait, func() { close(slot) })
	defer timer.Stop()
	select {
	case <-slot:
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-expired:
		return wait, ErrDeadline
	}
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

// Package breaker wraps sony/gobreaker's two-step breaker for one upstream:
// the outcome of a request is reported when its response (or stream) really
// ends; connection errors, timeouts, 5xx and 429 count as failures; client
// cancellations and other 4xx do not. It also honours an upstream's own
// Retry-After, and says how long until an open breaker half-opens.
package breaker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Expected outcomes.
var (
	// ErrOpen: the breaker is open; no request goes upstream.
	ErrOpen = errors.New("breaker: upstream circuit open")
	// ErrBackoff: the upstream asked us (429 Retry-After) to wait.
	ErrBackoff = errors.New("breaker: upstream asked to back off")
	// ErrFailed is what a caller reports for a failed exchange.
	ErrFailed = errors.New("breaker: upstream failed")
)

// Settings configure a Breaker. Zero values mean: open after 5 failures in
// a row, stay open 30 s, let 1 request probe when half-open.
type Settings struct {
	Failures uint32
	OpenFor  time.Duration
	Probes   uint32
}

// Breaker guards one upstream. It is safe for concurrent use.
type Breaker struct {
	cb      *gobreaker.TwoStepCircuitBreaker[any]
	openFor time.Duration
	now     func() time.Time

	mu       sync.Mutex
	openedAt time.Time
	retryAt  time.Time
}

// New returns a breaker named after its upstream; onChange (may be nil) is
// told of every state change, and now (nil: time.Now) is its clock.
func New(name string, s Settings, onChange func(from, to string), now func() time.Time) *Breaker {
	if s.Failures == 0 {
		s.Failures = 5
	}
	if s.OpenFor <= 0 {
		s.OpenFor = 30 * time.Second
	}
	if s.Probes == 0 {
		s.Probes = 1
	}
	if now == nil {
		now = time.Now
	}
	b := &Breaker{openFor: s.OpenFor, now: now}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
		Name:        name,
		MaxRequests: s.Probes,
		Timeout:     s.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= s.Failures },
		// A client that went away says nothing about the upstream.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = b.now()
				b.mu.Unlock()
			}
			if onChange != nil {
				onChange(from.String(), to.String())
			}
		},
	})
	return b
}

// Allow asks to send one request. On success, done must be called exactly
// once with the exchange's outcome: nil, ErrFailed (or any error), or
// context.Canceled when the client left. On refusal, retryAfter says when
// to try again.
func (b *Breaker) Allow() (done func(error), retryAfter time.Duration, err error) {
	b.mu.Lock()
	if wait := b.retryAt.Sub(b.now()); wait > 0 {
		b.mu.Unlock()
		return nil, wait, ErrBackoff
	}
	openedAt := b.openedAt
	b.mu.Unlock()
	done, err = b.cb.Allow()
	if err != nil {
		wait := openedAt.Add(b.openFor).Sub(b.now())
		if wait <= 0 {
			wait = time.Second // half-open and its probes are taken
		}
		return nil, wait, ErrOpen
	}
	return done, 0, nil
}

// Backoff honours an upstream's Retry-After: no request goes until d has
// passed.
func (b *Breaker) Backoff(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at := b.now().Add(d); at.After(b.retryAt) {
		b.retryAt = at
	}
}

// State is "closed", "open" or "half-open".
func (b *Breaker) State() string { return b.cb.State().String() }

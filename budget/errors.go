package budget

import (
	"errors"
	"fmt"
	"time"
)

// Expected outcomes. The HTTP layer maps each to one status with errors.Is.
var (
	// ErrRateLimited: a Rate bucket has no room now; retry after Result.RetryAfter.
	ErrRateLimited = errors.New("budget: rate limit exceeded")
	// ErrExhausted: a Ceiling's settled spend has reached it; nothing fits
	// until its period resets (or finance raises it).
	ErrExhausted = errors.New("budget: budget exhausted")
	// ErrOverBudget: the request's estimate is more than a Ceiling has left
	// even once every reservation in flight is settled; a smaller request
	// (a lower output cap) may fit now.
	ErrOverBudget = errors.New("budget: request larger than the budget's remainder")
	// ErrHeld: the request would fit in a Ceiling's unspent remainder, but
	// reservations in flight hold it; they free up as they settle.
	ErrHeld = errors.New("budget: remainder held by reservations in flight")
	// ErrConcurrency: too many requests in flight.
	ErrConcurrency = errors.New("budget: too many requests in flight")
	// ErrTooLarge: the request alone exceeds a Rate bucket's capacity and can
	// never be admitted, however long the client waits.
	ErrTooLarge = errors.New("budget: request exceeds the limit's capacity")
	// ErrStoreUnavailable: the store could not be reached in time. The
	// gateway fails closed on it.
	ErrStoreUnavailable = errors.New("budget: store unavailable")
	// ErrUnknownReservation: no open or recently closed reservation has this id.
	ErrUnknownReservation = errors.New("budget: unknown reservation")
	// ErrDuplicateReservation: a reservation with this id already exists.
	ErrDuplicateReservation = errors.New("budget: duplicate reservation id")
)

// RefusedError is returned by Engine.Reserve when a limit refuses. It wraps
// one of ErrRateLimited, ErrExhausted, ErrOverBudget, ErrHeld, ErrConcurrency
// or ErrTooLarge.
type RefusedError struct {
	Limit  Limit  // the limit that decided
	Result Result // the store's full answer
	reason error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v: %s limit %q (%s %s)", e.reason, e.Limit.Scope, e.Limit.Name, e.Limit.Kind, e.Limit.Unit)
}

func (e *RefusedError) Unwrap() error { return e.reason }

// RetryAfter is how long the client should wait before trying again.
func (e *RefusedError) RetryAfter() time.Duration { return e.Result.RetryAfter }

// HeldRetry is the Retry-After of ErrHeld: reservations in flight settle
// within a request's time, so the client is asked back in seconds (the
// gateway may refine it from how long its reservations stay open).
const HeldRetry = 2 * time.Second

// IsBudgetRefusal reports whether err is a Ceiling's refusal: exhausted,
// over budget or held.
func IsBudgetRefusal(err error) bool {
	return errors.Is(err, ErrExhausted) || errors.Is(err, ErrOverBudget) || errors.Is(err, ErrHeld)
}

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
	// ErrExhausted: a Ceiling would be passed; it resets with its period.
	ErrExhausted = errors.New("budget: budget exhausted")
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
// one of ErrRateLimited, ErrExhausted, ErrConcurrency or ErrTooLarge.
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

package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// Errors of the sequence that are not a budget's or a request body's
// (budget's sentinels and *budget.RefusedError, *upstream.RequestError).
var (
	ErrUpstream        = errors.New("gateway: upstream unreachable")
	ErrUpstreamTimeout = errors.New("gateway: upstream timed out")
	ErrClientCanceled  = errors.New("gateway: client went away")
	// ErrBadSignature: a bypass signature that does not verify — wrong
	// secret, altered request, a timestamp outside the window, or a
	// replayed nonce.
	ErrBadSignature = errors.New("gateway: invalid bypass signature")
	// ErrLedgerUnavailable: ledger entries wait to be written (a full or
	// failing disk), and the gateway takes on no spend it could not
	// record (Options.Admitting).
	ErrLedgerUnavailable = errors.New("gateway: the ledger cannot be written")
)

// ModelError is a model the gateway will not serve: unknown, unpriced or
// not allowed for the key.
type ModelError struct {
	Model   string
	Allowed bool // known and priced, but not for this key
}

func (e *ModelError) Error() string { return "gateway: " + e.Message() }

// Message says what is wrong, for the client.
func (e *ModelError) Message() string {
	if e.Allowed {
		return fmt.Sprintf("The model %q is not allowed for this key.", e.Model)
	}
	return fmt.Sprintf("The model %q is unknown or has no price; the gateway forwards only priced models.", e.Model)
}

// UpstreamRefused is a request no candidate upstream would take: every
// breaker open (or backing off), every queue full or timed out. Code
// names the reason the client can soonest retry after.
type UpstreamRefused struct {
	Code       string
	RetryAfter time.Duration
}

func (e *UpstreamRefused) Error() string { return "gateway: upstream refused: " + e.Code }

// Refused is a limit's refusal of a call, with what the sequence knows
// beyond the store's answer.
type Refused struct {
	*budget.RefusedError
	// Estimate is what the request would have taken from the deciding
	// limit, in its unit.
	Estimate int64
	// Fit is the largest output cap (per choice) with which the request
	// would be admitted now: 0 when none would, -1 when the request has
	// no output cap.
	Fit int64
	// CapField is the request's output cap field, when it has one.
	CapField string
	// Limits are the request's limits, one per entry of Result.Status.
	Limits []budget.Limit
	// After, when set, is the upstream an earlier attempt was given up at
	// after the request may have reached it: that attempt stays charged,
	// and it is the next attempt that was refused.
	After string
}

func (e *Refused) Unwrap() error { return e.RefusedError }

package budget

import (
	"context"
	"strings"
	"time"
)

// Store is what the request path needs of the budget state: each
// operation atomic. Both stores (budget/memstore, budget/redisstore) are a
// Backend and pass the contract suite in budget/storetest. A store that
// cannot reach its backend returns an error wrapping ErrStoreUnavailable.
type Store interface {
	// Reserve atomically checks every debit of r and, only if all fit,
	// applies them and records r as an open reservation whose lease ends
	// after r.Lease. On refusal nothing changes and the error is one of the
	// refusal sentinels (ErrRateLimited, ErrExhausted, ErrConcurrency,
	// ErrTooLarge); Result says which limit decided.
	Reserve(ctx context.Context, r *Reservation) (Result, error)
	// Settle resolves reservation id with the actual amounts. It is
	// idempotent: settling an id again (or after its lease expired and the
	// sweeper charged it in full) changes nothing and returns the first
	// outcome. An id never seen returns ErrUnknownReservation.
	Settle(ctx context.Context, id string, actual Amounts) (Outcome, error)
	// Extend renews the lease of an open reservation (a long stream's
	// heartbeat).
	Extend(ctx context.Context, id string, lease time.Duration) error
	// Sweep settles every reservation whose lease has expired at its
	// reserved amounts (over-count, never under-count) and returns how many.
	Sweep(ctx context.Context) (int, error)
	// Peek reports the current status of limits without changing them.
	Peek(ctx context.Context, limits []Limit) ([]Status, error)
}

// Admin is what finance and operators change in the budget state, through
// the admin API and the ledger reseed: run-time ceilings, resets, raises.
type Admin interface {
	// SetCeiling sets, at run time, the amount of the Ceiling bucket in
	// partition, replacing the configured one from the next reservation on
	// (in every instance sharing the store) until until, or for good if
	// until is zero; then the configured amount is back. A negative amount
	// removes the override now.
	SetCeiling(ctx context.Context, partition, bucket string, amount int64, until time.Time) error
	// Lapse ends the run-time change in force on bucket now: what it
	// would have lapsed to — an earlier change still lasting, else the
	// configured amount — is back (an unfreeze). ok is false if no change
	// was in force.
	Lapse(ctx context.Context, partition, bucket string) (ok bool, err error)
	// Schedule makes amount the ceiling of bucket from from on (next
	// month's ceiling, set now); until then the amount in force stays,
	// configured being what is in force without a change. ok is false,
	// and nothing changes, while a change that lapses is in force.
	Schedule(ctx context.Context, partition, bucket string, amount, configured int64, from time.Time) (ok bool, err error)
	// Override reads the run-time ceiling in force on a Ceiling bucket:
	// its amount and expiry (zero: none); ok is false if there is none or
	// it has lapsed.
	Override(ctx context.Context, partition, bucket string) (amount int64, until time.Time, ok bool, err error)
	// ResetSpent sets the settled spend of a Ceiling limit's current
	// period (by the store's clock) back to zero and returns that period's
	// id and the spend it had. Pending reservations stay pending: their
	// settlements still count.
	ResetSpent(ctx context.Context, l Limit) (period string, was int64, err error)
	// RaiseSpent raises the settled spend of a Ceiling limit's current
	// period to spent if it is lower (never lowers it: concurrent
	// settlements are never undone), and returns what it was. It rebuilds
	// counters from the ledger after the store lost them.
	RaiseSpent(ctx context.Context, l Limit, spent int64) (was int64, err error)
}

// Claims are the store's one-shot claims and plain counters, kept beside
// the budgets and seen alike by every instance sharing the store: a
// bypass nonce is spent once, a budget's threshold alert fires once a
// period, an address's failed authentications are counted per window.
// They are not limits: nothing is reserved or settled, and no request's
// reservation reads them. Names are the caller's; a store keeps each
// partition's apart, as it does budgets.
type Claims interface {
	// Claim takes name for ttl and reports whether this call took it:
	// true for the first caller, false for every other until it lapses or
	// is given back (Unclaim).
	Claim(ctx context.Context, partition, name string, ttl time.Duration) (bool, error)
	// Unclaim gives names back, so that each can be claimed again.
	Unclaim(ctx context.Context, partition string, names ...string) error
	// Count adds n (≥ 0) to counter name and returns its total and how
	// long until it lapses: a counter lives for window from its first
	// count, then starts again from zero. n = 0 only reads it.
	Count(ctx context.Context, partition, name string, n int64, window time.Duration) (total int64, left time.Duration, err error)
}

// Backend is a store with its admin side and its claims: what an Engine
// runs on.
type Backend interface {
	Store
	Admin
	Claims
}

// Reservation is an open claim on budgets: the upper bound of one request.
type Reservation struct {
	// ID is unique; it begins with "<partition>/" when the limits have a
	// partition, so a store can find the reservation's partition from its id.
	ID     string
	Debits []Debit
	Lease  time.Duration
	// Entry is what the ledger records if the lease expires unsettled and
	// the sweeper charges the reservation in full (a store that keeps the
	// ledger's outbox stores it with the reservation); nil: nothing.
	Entry *Entry
}

// PartitionOf returns the partition an id was made in ("" for none).
func PartitionOf(id string) string {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return ""
}

// Outcome says how a reservation was resolved.
type Outcome uint8

const (
	// Settled: resolved by this call with the actual amounts.
	Settled Outcome = iota + 1
	// AlreadySettled: an earlier Settle resolved it; nothing changed.
	AlreadySettled
	// Expired: its lease ran out and the sweeper charged the reserved
	// amounts; nothing changed.
	Expired
	// Spooled: the store could not be reached; the settlement is kept
	// durably and will be applied, once, when it can.
	Spooled
	// Corrected: the sweeper had charged the reservation in full when its
	// lease ran out; this late settlement turned that charge into the
	// actual amounts (a refund of the difference, once).
	Corrected
)

func (o Outcome) String() string {
	switch o {
	case Settled:
		return "settled"
	case AlreadySettled:
		return "already_settled"
	case Expired:
		return "expired"
	case Spooled:
		return "spooled"
	case Corrected:
		return "corrected"
	}
	return "unknown"
}

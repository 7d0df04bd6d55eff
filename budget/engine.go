package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/internal/uid"
)

// DefaultLease is how long a reservation lives without a settlement or a
// heartbeat before the sweeper charges it in full.
const DefaultLease = 10 * time.Minute

// Engine reserves upper bounds and settles real usage against a Store. It is
// safe for concurrent use.
type Engine struct {
	store Backend
	lease time.Duration
	now   func() time.Time // picks the periods of unreserved spend
}

// NewEngine returns an engine on store. A zero lease means DefaultLease.
func NewEngine(store Backend, lease time.Duration) *Engine {
	if lease <= 0 {
		lease = DefaultLease
	}
	return &Engine{store: store, lease: lease, now: time.Now}
}

// WithClock makes the engine read the time from now (tests pin it) and
// returns it.
func (e *Engine) WithClock(now func() time.Time) *Engine {
	e.now = now
	return e
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Reserve takes est from every limit, all or nothing. On refusal the error is
// a *RefusedError wrapping the sentinel of the deciding limit; a store
// failure wraps ErrStoreUnavailable. Each limit takes est in its own unit;
// a Concurrency limit takes one slot.
func (e *Engine) Reserve(ctx context.Context, limits []Limit, est Amounts) (*Reservation, Result, error) {
	return e.ReserveFor(ctx, limits, est, nil)
}

// ReserveFor is Reserve for a request the ledger will record: entry (its
// who and what, with Reserved set) is what the ledger gets if the
// reservation is never settled and the sweeper charges it.
func (e *Engine) ReserveFor(ctx context.Context, limits []Limit, est Amounts, entry *Entry) (*Reservation, Result, error) {
	if err := est.Validate(); err != nil {
		return nil, Result{Decider: -1}, err
	}
	debits := make([]Debit, len(limits))
	shard := 0
	for i := range limits {
		l := &limits[i] // read in place: a Limit is some twenty words
		if err := l.Validate(); err != nil {
			return nil, Result{Decider: -1}, err
		}
		// A request has a handful of limits: comparing each with those
		// before it costs less than hashing them into a set.
		for j := range i {
			if limits[j].Bucket == l.Bucket {
				return nil, Result{Decider: -1}, fmt.Errorf("budget: bucket %q listed twice", l.Bucket)
			}
		}
		if l.Partition != limits[0].Partition {
			return nil, Result{Decider: -1}, fmt.Errorf("budget: limits span partitions %q and %q", limits[0].Partition, l.Partition)
		}
		if l.Shard != 0 {
			if shard != 0 && l.Shard != shard {
				return nil, Result{Decider: -1}, fmt.Errorf("budget: limits span shards %d and %d", shard, l.Shard)
			}
			shard = l.Shard
		}
		amount := est.Of(l.Unit)
		if l.Kind == Concurrency {
			amount = 1
		}
		debits[i] = Debit{Limit: *l, Amount: amount}
	}
	id := reservationID(limits)
	r := &Reservation{ID: id, Debits: debits, Lease: e.lease, Entry: entry}
	if entry != nil {
		entry.ReservationID = id
	}
	res, err := e.store.Reserve(ctx, r)
	if err != nil {
		if isRefusal(err) && res.Decider >= 0 && res.Decider < len(limits) {
			return nil, res, &RefusedError{Limit: limits[res.Decider], Result: res, reason: err}
		}
		return nil, res, fmt.Errorf("reserving: %w", err)
	}
	r.Debits = Taken(r.Debits, res)
	return r, res, nil
}

// Settle charges the actual amounts and releases the rest of r. It is
// idempotent by reservation id.
func (e *Engine) Settle(ctx context.Context, r *Reservation, actual Amounts) (Outcome, error) {
	o, err := e.store.Settle(ctx, r.ID, actual)
	if err != nil {
		return o, fmt.Errorf("settling %s: %w", r.ID, err)
	}
	return o, nil
}

// Outbox is implemented by a store that keeps the ledger's outbox: it
// writes each ledger entry in the same atomic step as the settlement the
// entry records, so an entry exists exactly when its spend does, once per
// id, whatever fails in between. Something else moves the outbox to the
// durable ledger.
type Outbox interface {
	// KeepsLedger reports whether this store writes ledger entries.
	KeepsLedger() bool
	// SettleEntry is Store.Settle that, when it resolves id now, also
	// writes entry (its Outcome is the store's to record).
	SettleEntry(ctx context.Context, id string, actual Amounts, entry *Entry) (Outcome, error)
}

// KeepsLedger reports whether the engine's store writes the ledger entries
// it is handed (SettleEntry, ReserveFor, RecordUnreserved): then the
// caller must not write them elsewhere too.
func (e *Engine) KeepsLedger() bool {
	o, ok := e.store.(Outbox)
	return ok && o.KeepsLedger()
}

// SettleEntry is Settle that hands entry (its ReservationID set to r's) to
// a store that keeps the ledger (KeepsLedger), to be written with the
// settlement; otherwise entry is ignored and the caller records it.
func (e *Engine) SettleEntry(ctx context.Context, r *Reservation, actual Amounts, entry *Entry) (Outcome, error) {
	o, ok := e.store.(Outbox)
	if !ok || !o.KeepsLedger() || entry == nil {
		return e.Settle(ctx, r, actual)
	}
	entry.ReservationID = r.ID
	out, err := o.SettleEntry(ctx, r.ID, actual, entry)
	if err != nil {
		return out, fmt.Errorf("settling %s: %w", r.ID, err)
	}
	return out, nil
}

// Release gives r back in full: the request never reached the upstream, or
// the upstream failed without serving it.
func (e *Engine) Release(ctx context.Context, r *Reservation) error {
	_, err := e.Settle(ctx, r, Amounts{})
	return err
}

// Extend renews r's lease, for a long stream still flowing.
func (e *Engine) Extend(ctx context.Context, r *Reservation) error {
	if err := e.store.Extend(ctx, r.ID, e.lease); err != nil {
		return fmt.Errorf("extending %s: %w", r.ID, err)
	}
	return nil
}

// UnreservedRecorder is implemented by stores that can charge spend made
// without a reservation: requests a gateway let through (fail open, or on a
// local fallback bucket) while the store was unreachable. The charge must
// land, once, when the store answers again.
type UnreservedRecorder interface {
	// entry, if not nil, is written with the charge by a store that keeps
	// the ledger.
	RecordUnreserved(ctx context.Context, id string, debits []Debit, actual Amounts, entry *Entry) error
}

// ErrCannotRecord: the store cannot charge spend made without a reservation.
var ErrCannotRecord = errors.New("budget: the store cannot record unreserved spend")

// RecordUnreserved charges actual against the ceilings among limits for a
// request that was served without a reservation.
func (e *Engine) RecordUnreserved(ctx context.Context, limits []Limit, actual Amounts, entry *Entry) error {
	rec, ok := e.store.(UnreservedRecorder)
	if !ok {
		return ErrCannotRecord
	}
	if err := actual.Validate(); err != nil {
		return err
	}
	debits := make([]Debit, len(limits))
	for i, l := range limits {
		debits[i] = Debit{Limit: l}
	}
	SetPeriods(debits, e.now())
	id := reservationID(limits)
	if entry != nil {
		entry.ReservationID = id
	}
	if err := rec.RecordUnreserved(ctx, id, debits, actual, entry); err != nil {
		return fmt.Errorf("recording unreserved spend: %w", err)
	}
	return nil
}

// SetCeiling sets the amount of a Ceiling limit at run time, for every
// instance sharing the store, from the next reservation on, until until
// (zero: for good); a negative amount restores the configured one now.
func (e *Engine) SetCeiling(ctx context.Context, l Limit, amount int64, until time.Time) error {
	if l.Kind != Ceiling {
		return fmt.Errorf("budget: %s is a %s limit, not a budget", l.Bucket, l.Kind)
	}
	if err := e.store.SetCeiling(ctx, l.Partition, l.Bucket, amount, until); err != nil {
		return fmt.Errorf("setting ceiling %s: %w", l.Bucket, err)
	}
	return nil
}

// Lapse ends the run-time change in force on budget l now (Admin.Lapse).
func (e *Engine) Lapse(ctx context.Context, l Limit) (bool, error) {
	if l.Kind != Ceiling {
		return false, fmt.Errorf("budget: %s is a %s limit, not a budget", l.Bucket, l.Kind)
	}
	ok, err := e.store.Lapse(ctx, l.Partition, l.Bucket)
	if err != nil {
		return false, fmt.Errorf("ending a change of %s: %w", l.Bucket, err)
	}
	return ok, nil
}

// Schedule makes amount budget l's ceiling from from on (Admin.Schedule).
func (e *Engine) Schedule(ctx context.Context, l Limit, amount int64, from time.Time) (bool, error) {
	if l.Kind != Ceiling {
		return false, fmt.Errorf("budget: %s is a %s limit, not a budget", l.Bucket, l.Kind)
	}
	ok, err := e.store.Schedule(ctx, l.Partition, l.Bucket, amount, l.Amount, from)
	if err != nil {
		return false, fmt.Errorf("scheduling a change of %s: %w", l.Bucket, err)
	}
	return ok, nil
}

// Claim takes name in partition for ttl, for every instance sharing the
// store: true if this call took it (Claims.Claim).
func (e *Engine) Claim(ctx context.Context, partition, name string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("budget: claim %s: ttl %s", name, ttl)
	}
	ok, err := e.store.Claim(ctx, partition, name, ttl)
	if err != nil {
		return false, fmt.Errorf("claiming %s: %w", name, err)
	}
	return ok, nil
}

// Unclaim gives claims back (Claims.Unclaim).
func (e *Engine) Unclaim(ctx context.Context, partition string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	if err := e.store.Unclaim(ctx, partition, names...); err != nil {
		return fmt.Errorf("releasing claims: %w", err)
	}
	return nil
}

// Count adds n to a counter that lives for window from its first count
// and returns its total and time left (Claims.Count); n = 0 reads it.
func (e *Engine) Count(ctx context.Context, partition, name string, n int64, window time.Duration) (int64, time.Duration, error) {
	if n < 0 || window <= 0 {
		return 0, 0, fmt.Errorf("budget: counter %s: n %d, window %s", name, n, window)
	}
	total, left, err := e.store.Count(ctx, partition, name, n, window)
	if err != nil {
		return 0, 0, fmt.Errorf("counting %s: %w", name, err)
	}
	return total, left, nil
}

// Peek reports what is left in limits without changing them.
func (e *Engine) Peek(ctx context.Context, limits []Limit) ([]Status, error) {
	return e.store.Peek(ctx, limits)
}

// Override reads the run-time ceiling in force on a Ceiling limit, if any:
// its amount and when it lapses (zero: never).
func (e *Engine) Override(ctx context.Context, l Limit) (amount int64, until time.Time, ok bool, err error) {
	return e.store.Override(ctx, l.Partition, l.Bucket)
}

// ResetSpent starts a Ceiling limit's current period over: its settled
// spend goes back to zero for every instance sharing the store; the
// period's id and the spend it had are returned. Reservations still open
// keep their claim. The ledger is untouched: reports still show what was
// spent.
func (e *Engine) ResetSpent(ctx context.Context, l Limit) (period string, was int64, err error) {
	if l.Kind != Ceiling {
		return "", 0, fmt.Errorf("budget: %s is a %s limit, not a budget", l.Bucket, l.Kind)
	}
	if period, was, err = e.store.ResetSpent(ctx, l); err != nil {
		return "", 0, fmt.Errorf("resetting %s: %w", l.Bucket, err)
	}
	return period, was, nil
}

// RunSweeper charges expired leases every interval until ctx is done.
func (e *Engine) RunSweeper(ctx context.Context, interval time.Duration, log *slog.Logger) {
	tick.Every(ctx, interval, func(ctx context.Context) {
		n, err := e.store.Sweep(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("sweeping expired reservations", "err", err)
		}
		if n > 0 {
			log.Warn("charged expired reservations at their reserved amounts", "count", n)
		}
	})
}

// reservationID is a new reservation's id: unique, under its partition
// (the limits' first's) where it has one.
func reservationID(limits []Limit) string {
	if len(limits) > 0 && limits[0].Partition != "" {
		return uid.Prefixed(limits[0].Partition+"/", 26)
	}
	return uid.Text(26)
}

// Package memstore is the embedded budget.Store: state in process memory,
// snapshotted to a local file (periodically and at shutdown, by atomic
// rename) so month-to-date spend survives a restart. It serves a single
// gateway instance; many instances need budget/redisstore.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/appendlog"
)

// tombstoneTTL is how long a swept reservation is remembered, so that a late
// settlement corrects the sweep's charge once. A settled one is remembered
// in a bounded set only (budget.RecentIDs): memory does not grow with the
// requests a store settles.
const tombstoneTTL = 24 * time.Hour

// Store is the embedded store. It is safe for concurrent use; every
// operation holds one mutex for a few map look-ups.
type Store struct {
	now  func() time.Time
	path string // snapshot file; empty: no snapshots

	onExpire func(budget.Entry)

	mu         sync.Mutex
	state      state
	settled    budget.RecentIDs // reservations settled lately (not snapshotted)
	onSnapshot func(error)      // Options.OnSnapshot, or nil

	journal   *appendlog.File // nil without a snapshot path (journal.go)
	seq       int64           // the last record written to it (under mu)
	owed      []budget.Entry  // ledger entries of the operation under way (under mu)
	recovered []budget.Entry  // ledger entries of the records applied at start
	broken    atomic.Bool     // a record could not be written: admit nothing until a snapshot
	onJournal func(error)     // Options.OnJournal, or nil
}

type ceilingKey struct{ Bucket, Period string }

type ceilingUse struct{ Spent, Pending int64 }

type openReservation struct {
	Debits  []budget.Debit
	Expires int64 // unix µs
	// Entry is the ledger entry the sweeper hands to OnExpire.
	Entry *budget.Entry `json:",omitempty"`
}

type closedReservation struct {
	Outcome budget.Outcome
	Forget  int64 // unix µs
	// Swept are the debits the sweeper charged in full: a late settlement
	// corrects them to its actual amounts, once.
	Swept []budget.Debit `json:",omitempty"`
}

// state is everything a snapshot holds. Access requires Store.mu.
type state struct {
	// The counters requests use (behind pointers the memos keep). An
	// in-flight count of 0 stays in its map, as 0, until a sweep.
	rates    map[string]*int64
	ceilings map[ceilingKey]*ceilingUse
	inflight map[string]*int64
	open     map[string]openReservation
	closed   map[string]closedReservation
	override map[string]int64 // run-time ceiling overrides by bucket
	until    map[string]int64 // their expiries (unix µs), if they have one
	// previous are, for a temporary override, the run-time changes in
	// force before it, latest first, that come back as it lapses (a
	// permanent one ends the list).
	previous map[string][]overrideStep
	logs     map[string]map[string][2]int64 // sliding logs: bucket → reservation id → (at µs, amount)
	claims   map[string]int64               // claims (partition/name) → until (unix µs)
	counts   map[string]counter             // counters (partition/name)

	rateMemo, inflightMemo memo[int64]
	ceilingMemo            memo[ceilingUse]

	// journaling: every write is noted in writes for the journal, until
	// the operation commits (journal.go).
	journaling bool
	writes     []write
}

func newState() state {
	return state{
		rates:    map[string]*int64{},
		ceilings: map[ceilingKey]*ceilingUse{},
		inflight: map[string]*int64{},
		open:     map[string]openReservation{},
		closed:   map[string]closedReservation{},
		override: map[string]int64{},
		until:    map[string]int64{},
		previous: map[string][]overrideStep{},
		logs:     map[string]map[string][2]int64{},
		claims:   map[string]int64{},
		counts:   map[string]counter{},
	}
}

var _ budget.State = (*state)(nil)

func (s *state) rate(b string, create bool) *int64 {
	return cell(s.rates, &s.rateMemo, b, b, "", create)
}

func (s *state) ceiling(b, p string, create bool) *ceilingUse {
	return cell(s.ceilings, &s.ceilingMemo, ceilingKey{b, p}, b, p, create)
}

func (s *state) inFlight(b string, create bool) *int64 {
	return cell(s.inflight, &s.inflightMemo, b, b, "", create)
}

func (s *state) RateTAT(b string) int64 {
	if v := s.rate(b, false); v != nil {
		return *v
	}
	return 0
}

func (s *state) SetRateTAT(b string, t int64) {
	*s.rate(b, true) = t
	s.note(write{K: "r", B: b, A: t})
}

func (s *state) CeilingUse(b, p string) (int64, int64) {
	if u := s.ceiling(b, p, false); u != nil {
		return u.Spent, u.Pending
	}
	return 0, 0
}

func (s *state) SetCeilingUse(b, p string, spent, pending int64) {
	*s.ceiling(b, p, true) = ceilingUse{spent, pending}
	s.note(write{K: "c", B: b, P: p, A: spent, Z: pending})
}

func (s *state) InFlight(b string) int64 {
	if v := s.inFlight(b, false); v != nil {
		return *v
	}
	return 0
}

func (s *state) LogEntries(b string, since int64) [][2]int64 {
	log := s.logs[b]
	out := make([][2]int64, 0, len(log))
	for id, e := range log {
		if e[0] < since {
			delete(log, id)
			continue
		}
		out = append(out, e)
	}
	if len(log) == 0 {
		delete(s.logs, b)
	}
	slices.SortFunc(out, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	return out
}

func (s *state) SetLogEntry(b, id string, at, amount int64) {
	s.note(write{K: "g", B: b, P: id, A: at, Z: amount})
	if amount == 0 {
		delete(s.logs[b], id)
		return
	}
	if s.logs[b] == nil {
		s.logs[b] = map[string][2]int64{}
	}
	s.logs[b][id] = [2]int64{at, amount}
}

func (s *state) CeilingOverride(b string, now int64) (int64, bool) {
	v, _, ok := s.effective(b, now)
	return v, ok
}

// overrideStep is a run-time ceiling change: its amount, and when it
// lapses (unix µs; 0: permanent).
type overrideStep struct {
	Amount int64 `json:"amount"`
	Until  int64 `json:"until,omitempty"`
}

// effective is the run-time ceiling of b in force at now, and when it
// lapses (0: never): the latest change, or as it lapses the one before
// it that still lasts.
func (s *state) effective(b string, now int64) (amount, until int64, ok bool) {
	v, set := s.override[b]
	if !set {
		return 0, 0, false
	}
	u, temporary := s.until[b]
	if !temporary || now < u {
		return v, u, true
	}
	for _, p := range s.previous[b] {
		if p.Until == 0 || now < p.Until {
			return p.Amount, p.Until, true
		}
	}
	return 0, 0, false
}

// SetInFlight keeps a count of 0 in the map (a sweep drops it): deleting
// it at the end of every request would make it again at the next.
func (s *state) SetInFlight(b string, n int64) {
	if v := s.inFlight(b, n != 0); v != nil {
		*v = n
	}
	s.note(write{K: "n", B: b, A: n})
}

// Options configure a Store. The zero value is an in-memory store on the
// wall clock with no snapshots.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SnapshotPath is the file state is saved to and loaded from; empty
	// means memory only.
	SnapshotPath string
	// OnExpire, if set, receives the ledger entry of every reservation the
	// sweeper charges in full (one made with an Entry: its outcome
	// "expired", its cost the reservation), after the charge: the ledger
	// then holds what the counters were charged. The entry survives
	// snapshots with its reservation.
	OnExpire func(budget.Entry)
	// OnSnapshot, if set, receives every periodic snapshot's outcome
	// (nil, or why it could not be written).
	OnSnapshot func(error)
	// OnJournal, if set, receives every failure to write the journal
	// (journal.go); reservations are refused until a snapshot is written.
	OnJournal func(error)
}

// New returns a store, loading the snapshot at opts.SnapshotPath if one exists.
//
// With a snapshot path the store keeps a journal beside it
// (<path>.journal, journal.go) and applies it after the snapshot: nothing
// it acknowledged is lost to a crash. Reservations open when the process
// died are charged in full at the next sweep, as expired.
func New(opts Options) (*Store, error) {
	s := &Store{now: opts.Now, path: opts.SnapshotPath, state: newState(), onExpire: opts.OnExpire, onSnapshot: opts.OnSnapshot,
		onJournal: opts.OnJournal}
	if s.now == nil {
		s.now = time.Now
	}
	if s.path == "" {
		return s, nil
	}
	seq, err := s.load()
	if err != nil {
		return nil, fmt.Errorf("memstore: loading snapshot: %w", err)
	}
	if _, err := s.replay(seq); err != nil {
		return nil, fmt.Errorf("memstore: applying the journal: %w", err)
	}
	// No one can settle what this store's last process left open.
	now := s.now().UnixMicro()
	for id, r := range s.state.open {
		r.Expires = min(r.Expires, now)
		s.state.open[id] = r
	}
	if s.journal, err = appendlog.Open(journalPath(s.path)); err != nil {
		return nil, fmt.Errorf("memstore: the snapshot cannot be written: its journal: %w", err)
	}
	s.state.journaling = true
	return s, nil
}

var _ budget.Backend = (*Store)(nil)

// Reserve implements budget.Store.
func (s *Store) Reserve(ctx context.Context, r *budget.Reservation) (budget.Result, error) {
	if err := ctx.Err(); err != nil {
		return budget.Result{Decider: -1}, err
	}
	if s.broken.Load() {
		return budget.Result{Decider: -1}, errJournal
	}
	now := s.now()
	s.mu.Lock()
	if _, dup := s.state.open[r.ID]; dup {
		s.mu.Unlock()
		return budget.Result{Decider: -1}, budget.ErrDuplicateReservation
	}
	if _, dup := s.state.closed[r.ID]; dup || s.settled.Has(r.ID) {
		s.mu.Unlock()
		return budget.Result{Decider: -1}, budget.ErrDuplicateReservation
	}
	res, err := budget.Apply(&s.state, r.ID, r.Debits, now)
	if err != nil || !res.Allowed {
		// A refusal may still have written (a shadow limit's count).
		p := s.commitLocked()
		s.mu.Unlock()
		_ = s.durable(p)
		return res, err
	}
	open := openReservation{Debits: budget.Taken(r.Debits, res), Expires: now.Add(r.Lease).UnixMicro()}
	if s.onExpire != nil && r.Entry != nil {
		e := *r.Entry
		open.Entry = &e
	}
	s.state.open[r.ID] = open
	s.state.noteOpen(r.ID)
	p := s.commitLocked()
	s.mu.Unlock()
	if err := s.durable(p); err != nil {
		// Not on disk: not admitted. What it took goes back (in memory;
		// the next snapshot holds it).
		s.mu.Lock()
		_, _ = s.settleLocked(r.ID, budget.Amounts{}, budget.Settled, now)
		s.state.writes = s.state.writes[:0]
		s.mu.Unlock()
		return budget.Result{Decider: -1}, fmt.Errorf("%w: %w", errJournal, err)
	}
	return res, nil
}

// Settle implements budget.Store.
func (s *Store) Settle(ctx context.Context, id string, actual budget.Amounts) (budget.Outcome, error) {
	if err := actual.Validate(); err != nil {
		return 0, err
	}
	return s.settle(id, actual, nil)
}

// settle is Settle, with entry (nil: none) in the journal record as the
// ledger will have it.
func (s *Store) settle(id string, actual budget.Amounts, entry *budget.Entry) (budget.Outcome, error) {
	if err := actual.Validate(); err != nil {
		return 0, err
	}
	now := s.now()
	s.mu.Lock()
	o, err := s.settleLocked(id, actual, budget.Settled, now)
	if entry != nil && err == nil && (o == budget.Settled || o == budget.Corrected) && s.journal != nil {
		e := *entry
		e.ReservationID, e.Outcome = id, o.String()
		if o == budget.Corrected {
			e = budget.CorrectionOf(e)
		}
		s.owed = append(s.owed, e)
	}
	p := s.commitLocked()
	s.mu.Unlock()
	if jerr := s.durable(p); jerr != nil && err == nil {
		// The spend is counted in memory and the next snapshot holds it;
		// meanwhile nothing is admitted.
		err = fmt.Errorf("%w: %w", errJournal, jerr)
	}
	return o, err
}

// settleLocked resolves id; outcome is Settled for a real settlement and
// Expired for the sweeper. Requires s.mu.
func (s *Store) settleLocked(id string, actual budget.Amounts, outcome budget.Outcome, now time.Time) (budget.Outcome, error) {
	r, ok := s.state.open[id]
	if !ok {
		c, seen := s.state.closed[id]
		if !seen {
			if s.settled.Has(id) {
				return budget.AlreadySettled, nil
			}
			return 0, budget.ErrUnknownReservation
		}
		if c.Outcome == budget.Expired && outcome == budget.Settled && len(c.Swept) > 0 {
			if err := budget.CorrectSwept(&s.state, id, c.Swept, actual); err != nil {
				return 0, err
			}
			delete(s.state.closed, id)
			s.state.noteClosed(id)
			s.settled.Add(id)
			return budget.Corrected, nil
		}
		if c.Outcome == budget.Settled || c.Outcome == budget.Corrected {
			return budget.AlreadySettled, nil
		}
		return c.Outcome, nil
	}
	if err := budget.SettleDebits(&s.state, id, r.Debits, actual, now); err != nil {
		return 0, err
	}
	delete(s.state.open, id)
	s.state.noteOpen(id)
	if outcome != budget.Expired {
		s.settled.Add(id)
		return outcome, nil
	}
	s.state.closed[id] = closedReservation{Outcome: outcome, Forget: now.Add(tombstoneTTL).UnixMicro(), Swept: r.Debits}
	s.state.noteClosed(id)
	return outcome, nil
}

// Extend implements budget.Store.
func (s *Store) Extend(ctx context.Context, id string, lease time.Duration) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.state.open[id]
	if !ok {
		return budget.ErrUnknownReservation
	}
	r.Expires = now.Add(lease).UnixMicro()
	s.state.open[id] = r
	s.state.noteOpen(id)
	s.commitLocked() // not waited for: a crash charges the reservation in full anyway
	return nil
}

// Sweep implements budget.Store: expired leases are charged their reserved
// amounts, and tombstones and full rate buckets past their use are dropped.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	now := s.now()
	var expired []budget.Entry
	defer func() {
		for _, e := range expired {
			s.onExpire(e) // outside the lock: it may write a file
		}
	}()
	nowUs := now.UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.state.open {
		if r.Expires > nowUs {
			continue
		}
		if _, err := s.settleLocked(id, reservedAmounts(r.Debits), budget.Expired, now); err != nil {
			s.commitLocked()
			return n, fmt.Errorf("memstore: sweeping %s: %w", id, err)
		}
		n++
		if r.Entry != nil && s.onExpire != nil {
			e := *r.Entry
			e.ReservationID, e.Outcome, e.Cost, e.Usage.Estimated = id, budget.Expired.String(), e.Reserved, true
			expired = append(expired, e)
			if s.journal != nil {
				s.owed = append(s.owed, e)
			}
		}
	}
	for id, c := range s.state.closed {
		if c.Forget <= nowUs {
			delete(s.state.closed, id)
			s.state.noteClosed(id)
		}
	}
	s.state.rateMemo.forget()
	for b, tat := range s.state.rates {
		if *tat <= nowUs {
			delete(s.state.rates, b) // a full bucket reads the same as a missing one
		}
	}
	s.state.inflightMemo.forget()
	for b, n := range s.state.inflight {
		if *n == 0 {
			delete(s.state.inflight, b)
		}
	}
	s.forgetLapsed(nowUs)
	s.state.ceilingMemo.forget()
	for k := range s.state.ceilings {
		if budget.WindowExpired(k.Period, now) {
			delete(s.state.ceilings, k) // a rate window no longer read
		}
	}
	// The charges are not waited for: a crash would charge these
	// reservations in full again from the journal's open ones.
	s.commitLocked()
	return n, nil
}

// reservedAmounts is what charging a reservation in full means: for each
// unit, the largest amount any of its debits reserved. Every debit of one
// reservation reserved the same estimate in its own unit, so this recovers it.
func reservedAmounts(debits []budget.Debit) budget.Amounts {
	var a budget.Amounts
	for _, d := range debits {
		switch d.Limit.Unit {
		case budget.Tokens:
			a.Tokens = max(a.Tokens, d.Amount)
		case budget.Microdollars:
			a.Cost = max(a.Cost, budget.Money(d.Amount))
		case budget.Requests:
			if d.Limit.Kind != budget.Concurrency {
				a.Requests = max(a.Requests, d.Amount)
			}
		}
	}
	return a
}

// Peek implements budget.Store.
func (s *Store) Peek(ctx context.Context, limits []budget.Limit) ([]budget.Status, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return budget.Peek(&s.state, limits, now), nil
}

// SetCeiling implements budget.Admin. The embedded store has one
// partition space; partition is ignored.
func (s *Store) SetCeiling(ctx context.Context, partition, bucket string, amount int64, until time.Time) error {
	now := s.now().UnixMicro()
	s.mu.Lock()
	s.setCeilingLocked(bucket, amount, until, now)
	s.state.noteOverride(bucket)
	p := s.commitLocked()
	s.mu.Unlock()
	return s.durable(p)
}

func (s *Store) setCeilingLocked(bucket string, amount int64, until time.Time, now int64) {
	st := &s.state
	var previous []overrideStep
	if !until.IsZero() && amount >= 0 {
		// What is in force now comes back when this lapses: the change
		// in force and the ones it would lapse to, up to a permanent one.
		if v, u, ok := st.effective(bucket, now); ok {
			previous = append(previous, overrideStep{v, u})
			for _, p := range st.previous[bucket] {
				if u == 0 {
					break
				}
				if p.Until == 0 || p.Until > u {
					previous = append(previous, p)
					u = p.Until
				}
			}
		}
	}
	delete(st.until, bucket)
	delete(st.previous, bucket)
	if amount < 0 {
		delete(st.override, bucket)
		return
	}
	st.override[bucket] = amount
	if !until.IsZero() {
		st.until[bucket] = until.UnixMicro()
		if len(previous) > 0 {
			st.previous[bucket] = previous
		}
	}
}

// Schedule implements budget.Admin.
func (s *Store) Schedule(ctx context.Context, partition, bucket string, amount, configured int64, from time.Time) (bool, error) {
	now := s.now().UnixMicro()
	s.mu.Lock()
	st := &s.state
	current, until, ok := st.effective(bucket, now)
	if ok && until != 0 {
		s.mu.Unlock()
		return false, nil // a change that lapses is in force
	}
	if !ok {
		current = configured
	}
	st.override[bucket] = current
	st.until[bucket] = from.UnixMicro()
	st.previous[bucket] = []overrideStep{{Amount: amount}}
	st.noteOverride(bucket)
	p := s.commitLocked()
	s.mu.Unlock()
	return true, s.durable(p)
}

// Lapse implements budget.Admin.
func (s *Store) Lapse(ctx context.Context, partition, bucket string) (bool, error) {
	now := s.now().UnixMicro()
	s.mu.Lock()
	st := &s.state
	_, _, ok := st.effective(bucket, now)
	if ok {
		// What the change in force lapses to, still lasting, comes back.
		var next []overrideStep
		for _, p := range st.previous[bucket] {
			if p.Until == 0 || now < p.Until {
				next = append(next, p)
			}
		}
		if u, temporary := st.until[bucket]; temporary && now >= u {
			// The head had lapsed already: the one in force is next[0].
			if len(next) > 0 {
				next = next[1:]
			}
		}
		delete(st.override, bucket)
		delete(st.until, bucket)
		delete(st.previous, bucket)
		if len(next) > 0 {
			st.override[bucket] = next[0].Amount
			if next[0].Until != 0 {
				st.until[bucket] = next[0].Until
			}
			if len(next) > 1 {
				st.previous[bucket] = next[1:]
			}
		}
		st.noteOverride(bucket)
	}
	p := s.commitLocked()
	s.mu.Unlock()
	return ok, s.durable(p)
}

// Override implements budget.Admin.
func (s *Store) Override(ctx context.Context, partition, bucket string) (int64, time.Time, bool, error) {
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	amount, u, ok := s.state.effective(bucket, now)
	var until time.Time
	if ok && u != 0 {
		until = time.UnixMicro(u)
	}
	return amount, until, ok, nil
}

// ResetSpent implements budget.Admin.
func (s *Store) ResetSpent(ctx context.Context, l budget.Limit) (string, int64, error) {
	k := ceilingKey{l.Bucket, budget.PeriodID(l.Period, s.now(), l.Location)}
	s.mu.Lock()
	var spent int64
	if u := s.state.ceiling(k.Bucket, k.Period, false); u != nil {
		spent = u.Spent
		s.state.SetCeilingUse(k.Bucket, k.Period, 0, u.Pending)
	}
	p := s.commitLocked()
	s.mu.Unlock()
	return k.Period, spent, s.durable(p)
}

// RaiseSpent implements budget.Admin.
func (s *Store) RaiseSpent(ctx context.Context, l budget.Limit, spent int64) (int64, error) {
	if spent < 0 {
		return 0, fmt.Errorf("memstore: negative spend %d", spent)
	}
	k := ceilingKey{l.Bucket, budget.PeriodID(l.Period, s.now(), l.Location)}
	s.mu.Lock()
	was, pending := s.state.CeilingUse(k.Bucket, k.Period)
	s.state.SetCeilingUse(k.Bucket, k.Period, max(was, spent), pending)
	p := s.commitLocked()
	s.mu.Unlock()
	return was, s.durable(p)
}

// Spent returns the settled spend of a Ceiling bucket in a period, and what
// is still pending there.
func (s *Store) Spent(bucket, period string) (spent, pending int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.CeilingUse(bucket, period)
}

// Open returns the number of open reservations.
func (s *Store) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.state.open)
}

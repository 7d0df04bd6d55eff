// Package redisstore is the budget.Store that many gateway instances share:
// state in Redis (a single node, Sentinel or Cluster through go-redis
// UniversalClient), changed only by Lua scripts embedded beside this file,
// each one atomic call that validates its arguments before its first write
// and takes the time from Redis TIME, so every instance shares one clock.
//
// Every key of one partition (org) carries the hash tag of that partition,
// "tg:{<org>}:…", so one script touches one cluster slot; a sharded limit's
// shard has a slot of its own (shards.go). Settlements that
// cannot reach Redis are spooled (see spool.go) and replayed when it answers.
//
// The budget core never imports this package; it imports the core.
package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/tollgate-dev/tollgate/budget"
)

var (
	//go:embed reserve.lua
	reserveLua string
	//go:embed settle.lua
	settleLua string
	//go:embed extend.lua
	extendLua string
	//go:embed expired.lua
	expiredLua string
	//go:embed override.lua
	overrideLua string
	//go:embed kinds.lua
	kindsLua string
	//go:embed peek.lua
	peekLua string
	//go:embed pace.lua
	paceLua string
	//go:embed reset.lua
	resetLua string
	//go:embed raise.lua
	raiseLua string

	reserveScript = redis.NewScript(kindsLua + overrideLua + reserveLua)
	settleScript  = redis.NewScript(kindsLua + settleLua)
	extendScript  = redis.NewScript(extendLua)
	expiredScript = redis.NewScript(expiredLua)
	peekScript    = redis.NewScript(kindsLua + overrideLua + peekLua)
	paceScript    = redis.NewScript(paceLua)
	resetScript   = redis.NewScript(resetLua)
	raiseScript   = redis.NewScript(raiseLua)
)

// scripter is what the store needs of a Redis client: go-redis's
// UniversalClient (single node, Sentinel, Cluster) satisfies it.
type scripter interface {
	redis.Scripter
}

// Options configure a Store. Zero values mean the documented defaults.
type Options struct {
	// Prefix starts every key (default "tg").
	Prefix string
	// Timeout bounds one reservation call (default 1 s; the request's own
	// deadline bounds it too): past it the store is unavailable for that
	// request and the gateway fails closed.
	Timeout time.Duration
	// SettleTimeout bounds one settlement call before it is spooled
	// (default 1 s).
	SettleTimeout time.Duration
	// TombstoneTTL is how long a swept reservation is remembered, so a
	// settlement that comes later (from a spool) corrects the sweep's
	// charge, and how long spend made without a reservation is, so its
	// replay charges once (default 24 h). A settled reservation leaves
	// nothing behind.
	TombstoneTTL time.Duration
	// Partitions the sweeper looks at besides those this process has seen
	// (the configured orgs).
	Partitions []string
	// Shards is how many shards of each of Partitions sharded limits use
	// (budget.Limit.Shard up to it, config.ShardSlots): the sweeper looks
	// in each from the start, as in its partition.
	Shards int
	// Now pins the clock for tests; nil means Redis TIME.
	Now func() time.Time
	// Spool keeps settlements Redis could not take; nil means none (a
	// failed settlement is then returned as an error).
	Spool *Spool
	// Log receives what an operator must know (lost data); nil discards.
	Log *slog.Logger
	// BreakerTimeout is how long the store answers "unavailable" at once,
	// without trying Redis, after consecutive failures (default 1 s); then
	// one call probes it.
	BreakerTimeout time.Duration
	// Ledger: the store keeps the ledger's outbox. Each settlement handed
	// an entry (SettleEntry) appends it to the partition's ledger stream in
	// the settling script, and a reservation keeps its entry for the
	// sweeper; a LedgerConsumer moves the streams to the durable ledger.
	Ledger bool
	// Leases, when set, turn budget leases on (see LeaseOptions; the
	// caller runs RunLeases). Nil: every request is reserved exactly, one
	// script call to reserve and one to settle.
	Leases *LeaseOptions
}

// Store is the Redis-backed budget.Store. It is safe for concurrent use.
type Store struct {
	rdb  scripter
	opts Options

	// breaker fails fast while Redis is down, so a refusal (or a degraded
	// route) does not wait out a timeout on every request.
	breaker *gobreaker.CircuitBreaker[any]
	// answered is when Redis last answered a call (unix ns): a call that
	// times out meanwhile met a slow Redis, or a busy gateway, not a
	// dead one.
	answered atomic.Int64

	mu   sync.Mutex
	open map[string]openReservation // reservations made here and not yet settled
	// parts are the ids of the parts of reservations made here across
	// a partition and its shards (shards.go), until they are settled.
	parts map[string][]string
	// settled are the reservations settled here lately. Elsewhere a
	// settled id reads as unknown, except to a settlement replayed from
	// this process's spool, which carries its partition's epoch.
	settled    budget.RecentIDs
	partitions map[string]struct{}

	lease *leaser // nil: exact
	batch batcher // settlements waiting together go in one pipeline
}

// openReservation is what this process remembers of a reservation it made:
// the debits taken and its partition's epoch then.
type openReservation struct {
	debits []budget.Debit
	epoch  int64
}

var _ budget.Store = (*Store)(nil)

// New returns a store on rdb. The client must be built with
// ContextTimeoutEnabled (go-redis otherwise ignores context deadlines and
// waits its own ReadTimeout, so the store's timeouts are not kept) and
// MaxRetries -1 (a retried script whose first reply was lost would find its
// own reservation; the store decides what a failed call means).
func New(rdb redis.Scripter, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = "tg"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	if opts.SettleTimeout <= 0 {
		opts.SettleTimeout = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.TombstoneTTL <= 0 {
		opts.TombstoneTTL = 24 * time.Hour
	}
	if opts.BreakerTimeout <= 0 {
		opts.BreakerTimeout = time.Second
	}
	s := &Store{rdb: rdb, opts: opts, open: map[string]openReservation{}, parts: map[string][]string{}, partitions: map[string]struct{}{}}
	s.batch.s = s
	s.breaker = gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		Name:        "redis",
		MaxRequests: 1,
		Timeout:     opts.BreakerTimeout,
		// Five failures in a row: a dead Redis fails every call at once,
		// while a burst that makes a few calls wait past their timeout
		// lets others through in between and does not trip it.
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
		// Only failing to reach Redis trips it; a script's own error reply
		// or a missing key is Redis answering.
		IsSuccessful: isAnswer,
		// A caller that gave up says nothing about Redis, nor does a call
		// that timed out while others got answers: slow is not down (a
		// CPU-starved gateway reads its replies late). A Redis that
		// stopped answering altogether trips it after BreakerTimeout.
		IsExcluded: func(err error) bool {
			return errors.Is(err, context.Canceled) ||
				(isTimeout(err) && time.Since(time.Unix(0, s.answered.Load())) < opts.BreakerTimeout)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			opts.Log.Warn("redis store breaker", "from", from.String(), "to", to.String())
		},
	})
	for _, p := range opts.Partitions {
		s.partitions[p] = struct{}{}
		for k := range opts.Shards {
			if p != "" && opts.Shards > 1 {
				s.partitions[partitionOf(&budget.Limit{Partition: p, Shard: k + 1})] = struct{}{}
			}
		}
	}
	if opts.Leases != nil {
		s.lease = newLeaser(s, *opts.Leases)
	}
	return s
}

// flushFor charges what this instance spent of partition's buckets, before
// an operation that reads or rewrites the spend in Redis.
func (s *Store) flushFor(ctx context.Context, partition string) error {
	if s.lease == nil {
		return nil
	}
	return s.lease.flush(ctx, partition, nil)
}

func (s *Store) settledHere(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled.Has(id)
}

func (s *Store) rememberSettled(id string) {
	s.mu.Lock()
	s.settled.Add(id)
	s.mu.Unlock()
}

// tag is the hash-tagged key prefix of a partition. Partitions are config
// ids without braces (budget.Limit.Validate refuses them); the empty
// partition gets "_".
func (s *Store) tag(partition string) string {
	if partition == "" {
		partition = "_"
	}
	return s.opts.Prefix + ":{" + partition + "}:"
}

func (s *Store) bucketKey(tag string, d *budget.Debit) string {
	switch d.Limit.Kind {
	case budget.Rate:
		if d.Limit.Algorithm == budget.SlidingLog {
			return tag + "l:" + d.Limit.Bucket
		}
		if d.Limit.Algorithm != budget.TokenBucket {
			return tag + "w:" + d.Limit.Bucket + ":" + d.Period
		}
		return tag + "r:" + d.Limit.Bucket
	case budget.Ceiling:
		return tag + "c:" + d.Limit.Bucket + ":" + d.Period
	}
	return tag + "n:" + d.Limit.Bucket
}

// now is this process's clock, or Options.Now: it picks periods; the
// scripts charge by Redis's TIME unless Options.Now pins it (nowArg).
func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

func (s *Store) nowArg() string {
	if s.opts.Now == nil {
		return ""
	}
	return strconv.FormatInt(s.opts.Now().UnixMicro(), 10)
}

// BreakerState is the store's breaker: "closed" (calling Redis),
// "open" (answering unavailable at once) or "half-open" (probing).
func (s *Store) BreakerState() string { return s.breaker.State().String() }

// do runs one Redis call through the breaker.
func (s *Store) do(f func() error) error {
	_, err := s.breaker.Execute(func() (any, error) {
		err := f()
		if isAnswer(err) {
			s.answered.Store(time.Now().UnixNano())
		}
		return nil, err
	})
	return err
}

// isAnswer tells the outcome of a call Redis answered: a reply, a missing
// key or the script's own error.
func isAnswer(err error) bool { return err == nil || isScriptError(err) || errors.Is(err, redis.Nil) }

// isTimeout tells a call that ran out of time from one that failed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// unavailable wraps every failure to talk to Redis as budget.ErrStoreUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, budget.ErrStoreUnavailable, err)
}

// isScriptError tells a script's own error reply (a bug or a bad argument)
// from a failure to reach Redis.
func isScriptError(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		var ne net.Error
		return !errors.As(err, &ne) && strings.Contains(err.Error(), "tollgate:")
	}
	return false
}

// ceilingRetention keeps a finished period's counters readable for reports.
func ceilingRetention(p budget.Period) time.Duration {
	if p == budget.Day {
		return 8 * 24 * time.Hour
	}
	return 40 * 24 * time.Hour
}

// Reserve implements budget.Store: one script call in the common case; a
// second only when a ceiling's period boundary falls between this host's
// clock and Redis's.
func (s *Store) Reserve(ctx context.Context, r *budget.Reservation) (budget.Result, error) {
	for _, d := range r.Debits {
		if strings.ContainsAny(d.Limit.Bucket, "\t\n") {
			return budget.Result{Decider: -1}, fmt.Errorf("redisstore: bucket %q contains a tab or newline", d.Limit.Bucket)
		}
	}
	if parts := split(r); parts != nil {
		return s.reserveParts(ctx, r, parts)
	}
	return s.reservePart(ctx, r)
}

// reservePart reserves r, whose debits all keep their state in the
// partition of its id.
func (s *Store) reservePart(ctx context.Context, r *budget.Reservation) (budget.Result, error) {
	if s.lease == nil {
		return s.reserveExact(ctx, r)
	}
	if res, handled, err := s.lease.reserve(ctx, r); handled {
		return res, err
	}
	s.lease.counted(&s.lease.stats.Exact)
	res, err := s.reserveExact(ctx, r)
	if budget.IsBudgetRefusal(err) && s.lease.standsInTheWay(ctx, r) {
		// Refused while this process held free slices of its buckets,
		// counted as pending: with them given back, once more.
		return s.reserveExact(ctx, r)
	}
	return res, err
}

// reserveExact reserves r in Redis: one script call in the common case.
func (s *Store) reserveExact(ctx context.Context, r *budget.Reservation) (budget.Result, error) {
	partition := budget.PartitionOf(r.ID)
	tag := s.tag(partition)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()

	s.mu.Lock()
	dup := s.settled.Has(r.ID)
	s.mu.Unlock()
	if dup {
		return budget.Result{Decider: -1}, budget.ErrDuplicateReservation
	}
	now := s.now()
	for attempt := 0; ; attempt++ {
		budget.SetPeriods(r.Debits, now)
		keys, args, err := s.reserveArgs(tag, r, now)
		if err != nil {
			return budget.Result{Decider: -1}, err
		}
		var raw []int64
		err = s.do(func() (err error) {
			raw, err = reserveScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
			return err
		})
		if err != nil {
			if isScriptError(err) {
				return budget.Result{Decider: -1}, fmt.Errorf("redisstore: reserve: %w", err)
			}
			// The script may have run before the connection failed: the
			// caller will refuse the request, so give back whatever was
			// taken, once Redis answers again. A call the breaker refused,
			// or that could not even connect, never reached Redis.
			if !neverSent(err) {
				s.spoolRelease(r)
			}
			return budget.Result{Decider: -1}, unavailable("reserve", err)
		}
		reply, err := decodeReserve(raw, len(r.Debits))
		if err != nil {
			return budget.Result{Decider: -1}, err
		}
		switch reply.status {
		case reserveDuplicate:
			return budget.Result{Decider: -1}, budget.ErrDuplicateReservation
		case reserveOutOfPeriod:
			if attempt > 0 {
				return budget.Result{Decider: -1}, fmt.Errorf("redisstore: reserve: no period contains Redis time %v", reply.now)
			}
			now = reply.now // this host's clock is across a period boundary from Redis's
			continue
		}
		counters := reply.counters
		for i := range counters {
			if r.Debits[i].Limit.Algorithm == budget.SlidingWindow {
				counters[i].Prev, counters[i].TAT = counters[i].TAT, 0 // the script reports it in the first slot
			}
		}
		res, err := budget.Evaluate(r.Debits, counters, reply.now)
		if allowed := reply.status == reserveAllowed; allowed != res.Allowed {
			// The script and the Go algorithm disagree: a bug. Refuse.
			return budget.Result{Decider: -1}, fmt.Errorf("redisstore: reserve: script allowed=%v, algorithm allowed=%v (%v)", allowed, res.Allowed, err)
		}
		if res.Allowed {
			s.mu.Lock()
			s.open[r.ID] = openReservation{debits: budget.Taken(r.Debits, res), epoch: reply.epoch}
			s.partitions[partition] = struct{}{}
			s.mu.Unlock()
		}
		return res, err
	}
}

func (s *Store) reserveArgs(tag string, r *budget.Reservation, now time.Time) ([]string, []any, error) {
	keys := make([]string, 0, 3+len(r.Debits))
	keys = append(keys, tag+"open", tag+"leases", tag+"ceilings")
	entry := ""
	if r.Entry != nil && s.opts.Ledger {
		rec, err := json.Marshal(r.Entry)
		if err != nil {
			return nil, nil, err
		}
		entry = string(rec)
	}
	args := make([]any, 0, 5+debitFields*len(r.Debits))
	args = append(args, r.ID, r.Lease.Microseconds(), s.nowArg(), len(r.Debits), entry)
	for i := range r.Debits {
		d := &r.Debits[i]
		keys = append(keys, s.bucketKey(tag, d))
		a, err := s.debitArg(tag, d, now)
		if err != nil {
			return nil, nil, err
		}
		args = a.appendTo(args)
	}
	return keys, args, nil
}

// debitArg is d as reserve.lua takes it.
func (s *Store) debitArg(tag string, d *budget.Debit, now time.Time) (debitArg, error) {
	l := &d.Limit
	a := debitArg{amount: d.Amount, capacity: l.Amount, shadow: l.Shadow}
	switch {
	case l.Kind == budget.Rate && l.Algorithm == budget.SlidingLog:
		a.kind, a.start, a.keep = kLog, l.Window.Microseconds(), l.Window+time.Second
	case l.Kind == budget.Rate && l.Algorithm != budget.TokenBucket:
		var prev string
		a.start, a.end, prev = budget.WindowBounds(l, now)
		a.kind, a.keep = kCeiling, l.Window+time.Second
		if l.Algorithm == budget.SlidingWindow {
			p := *d
			p.Period = prev
			a.kind, a.name = kSliding, s.bucketKey(tag, &p)
		}
	case l.Kind == budget.Rate:
		cost, err := budget.RateCost(l, d.Amount)
		if err != nil {
			return a, err
		}
		tol, err := budget.RateCost(l, l.Capacity())
		if err != nil {
			return a, err
		}
		a.kind, a.amount, a.capacity = kRate, cost, tol
	case l.Kind == budget.Ceiling:
		a.kind, a.name, a.keep = kCeiling, l.Bucket, ceilingRetention(l.Period)
		a.start, a.end = budget.PeriodStart(l.Period, now, l.Location).UnixMicro(), budget.PeriodEnd(l.Period, now, l.Location).UnixMicro()
		if l.Meter {
			a.kind = kMeter // charged at settlement, never read here
		}
	case l.Kind == budget.Concurrency:
		a.kind = kConcurrency
	default:
		return a, fmt.Errorf("redisstore: limit %s: unknown kind", l.Bucket)
	}
	return a, nil
}

// Settle implements budget.Store. A settlement Redis cannot take is spooled
// (when the store has a spool) and reported as budget.Spooled.
func (s *Store) Settle(ctx context.Context, id string, actual budget.Amounts) (budget.Outcome, error) {
	return s.settle(ctx, id, actual, nil)
}

var _ budget.Outbox = (*Store)(nil)

// KeepsLedger implements budget.Outbox.
func (s *Store) KeepsLedger() bool { return s.opts.Ledger }

// SettleEntry implements budget.Outbox: entry goes to the ledger stream in
// the script that settles id, or with the settlement into the spool.
func (s *Store) SettleEntry(ctx context.Context, id string, actual budget.Amounts, entry *budget.Entry) (budget.Outcome, error) {
	rec, err := s.record(entry)
	if err != nil {
		return 0, err
	}
	return s.settle(ctx, id, actual, rec)
}

// record is entry as the ledger stream takes it; nil if the store keeps no
// ledger.
func (s *Store) record(entry *budget.Entry) (json.RawMessage, error) {
	if !s.opts.Ledger || entry == nil {
		return nil, nil
	}
	return json.Marshal(entry)
}

func (s *Store) settle(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	if err := actual.Validate(); err != nil {
		return 0, err
	}
	if ids := s.partsOf(id); ids != nil {
		return s.settleParts(ctx, id, ids, actual, rec)
	}
	return s.settlePart(ctx, id, actual, rec)
}

// settlePart settles one reservation of one partition.
func (s *Store) settlePart(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	if s.lease != nil {
		if o, handled, err := s.lease.settle(id, actual, rec); handled {
			s.mu.Lock()
			_, exactToo := s.open[id]
			s.mu.Unlock()
			if err != nil || !exactToo {
				return o, err
			}
			// Its exact part too; the ledger entry went with the local one.
			ox, err := s.settleExact(ctx, id, actual, nil)
			if ox == budget.Spooled {
				o = ox
			}
			return o, err
		}
	}
	return s.settleExact(ctx, id, actual, rec)
}

// settleExact settles a reservation made in Redis.
func (s *Store) settleExact(ctx context.Context, id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	s.mu.Lock()
	open, mine := s.open[id]
	again := !mine && s.settled.Has(id)
	s.mu.Unlock()
	if again {
		return budget.AlreadySettled, nil
	}
	call, err := s.settleCall(id, open.debits, mine, actual)
	if err != nil {
		return 0, err
	}
	call.Epoch, call.Record = open.epoch, rec
	// A reservation this process did not make (or an id replayed after its
	// settlement) goes to the script with no actual values: it reports a
	// tombstone or an unknown id, or charges an open reservation at its
	// reserved amounts — over, never under.
	o, err := s.run(ctx, call)
	if err != nil && errors.Is(err, budget.ErrStoreUnavailable) && s.opts.Spool != nil && len(call.Actual) > 0 {
		if serr := s.opts.Spool.Add(call); serr != nil {
			return 0, errors.Join(err, serr)
		}
		o, err = budget.Spooled, nil
	}
	if err == nil {
		s.mu.Lock()
		delete(s.open, id)
		s.mu.Unlock()
	}
	return o, err
}

// neverSent tells errors that prove a call did not reach Redis.
func neverSent(err error) bool {
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// spoolRelease queues the release of a reservation whose reserve call
// failed midway. If the reserve never ran, the release finds no record and
// does nothing.
func (s *Store) spoolRelease(r *budget.Reservation) {
	if s.opts.Spool == nil {
		return
	}
	call, err := s.settleCall(r.ID, r.Debits, true, budget.Amounts{})
	if err != nil {
		return
	}
	call.Kinds, call.Buckets = nil, nil // nothing to charge if the record is not there
	if err := s.opts.Spool.Add(call); err != nil {
		s.opts.Log.Error("spooling the release of an unanswered reservation", "reservation", r.ID, "err", err)
	}
}

// SettleCall is one settlement as the script takes it: what the spool
// writes down and replays.
type SettleCall struct {
	ID     string  `json:"id"`
	Actual []int64 `json:"actual"`
	// Epoch is the partition's epoch when the reservation was made (0: not
	// known): a record that is gone under the same epoch was settled, under
	// another one Redis lost it.
	Epoch int64 `json:"epoch,omitempty"`
	// Kinds and Buckets describe the debits, so a ceiling is still charged
	// if Redis lost the reservation record while the call waited.
	Kinds   []string `json:"kinds,omitempty"`
	Buckets []string `json:"buckets,omitempty"`
	// Unreserved marks spend made without a reservation (the store was
	// unreachable and the gateway failed open or used a local bucket):
	// there is no record to find, by design.
	Unreserved bool `json:"unreserved,omitempty"`
	// Record is the ledger entry the script appends to the ledger stream
	// when this call is the one that settles (empty: none).
	Record json.RawMessage `json:"record,omitempty"`
}

var _ budget.UnreservedRecorder = (*Store)(nil)

// RecordUnreserved implements budget.UnreservedRecorder: the ceilings among
// debits are charged actual, now if Redis answers, else from the spool.
func (s *Store) RecordUnreserved(ctx context.Context, id string, debits []budget.Debit, actual budget.Amounts, entry *budget.Entry) error {
	r := &budget.Reservation{ID: id, Debits: debits, Entry: entry}
	parts := split(r)
	if parts == nil {
		return s.recordUnreserved(ctx, id, debits, actual, entry)
	}
	var errs []error
	for _, p := range parts {
		errs = append(errs, s.recordUnreserved(ctx, p.r.ID, p.r.Debits, actual, p.r.Entry))
	}
	return errors.Join(errs...)
}

func (s *Store) recordUnreserved(ctx context.Context, id string, debits []budget.Debit, actual budget.Amounts, entry *budget.Entry) error {
	call, err := s.settleCall(id, debits, true, actual)
	if err != nil {
		return err
	}
	if call.Record, err = s.record(entry); err != nil {
		return err
	}
	for i := range call.Actual {
		if call.Kinds[i] != kCeiling {
			call.Actual[i] = 0 // rate and concurrency state had no reservation to adjust
		}
	}
	call.Unreserved = true
	if _, err := s.run(ctx, call); err == nil || !errors.Is(err, budget.ErrStoreUnavailable) {
		return err
	}
	if s.opts.Spool == nil {
		return unavailable("recording unreserved spend", errors.New("no spool"))
	}
	return s.opts.Spool.Add(call)
}

func (s *Store) settleCall(id string, debits []budget.Debit, mine bool, actual budget.Amounts) (*SettleCall, error) {
	call := &SettleCall{ID: id}
	if !mine {
		return call, nil
	}
	tag := s.tag(budget.PartitionOf(id))
	call.Actual = make([]int64, len(debits))
	call.Kinds = make([]string, len(debits))
	call.Buckets = make([]string, len(debits))
	for i := range debits {
		d := &debits[i]
		call.Kinds[i], call.Buckets[i] = kindArg(d.Limit.Kind), s.bucketKey(tag, d)
		a := actual.Of(d.Limit.Unit)
		switch {
		case d.Limit.Kind == budget.Rate && d.Limit.Algorithm != budget.TokenBucket:
			call.Actual[i] = a // a window is settled like a budget
		case d.Limit.Kind == budget.Rate:
			used, err := budget.RateCost(&d.Limit, a)
			if err != nil {
				return nil, err
			}
			reserved, err := budget.RateCost(&d.Limit, d.Amount)
			if err != nil {
				return nil, err
			}
			call.Actual[i] = used - reserved
		case d.Limit.Kind == budget.Ceiling:
			call.Actual[i] = a
		}
	}
	return call, nil
}

// settleKeys are settle.lua's keys for reservation id.
func (s *Store) settleKeys(id string) []string {
	tag := s.tag(budget.PartitionOf(id))
	return []string{tag + "open", tag + "leases", tag + "done:" + id, tag + "ledger", tag + "ceilings", tag + "res:" + id}
}

func (s *Store) run(ctx context.Context, call *SettleCall) (budget.Outcome, error) {
	mode := modeSettle
	if call.Unreserved {
		mode = modeUnreserved
	}
	raw, err := s.runSettle(ctx, call.ID, mode, call)
	if err != nil {
		return 0, err
	}
	if raw != settleUnknown {
		s.mu.Lock()
		s.settled.Add(call.ID)
		s.mu.Unlock()
	}
	switch raw {
	case settleSettled:
		return budget.Settled, nil
	case settleBefore:
		return budget.AlreadySettled, nil
	case settleExpired:
		return budget.Expired, nil
	case settleCorrected:
		return budget.Corrected, nil
	case settleWithoutRecord:
		if call.Unreserved {
			return budget.Settled, nil
		}
		s.opts.Log.Error("settled without its reservation record: Redis lost data; ceilings were charged from the settlement, pending and rate state are gone",
			"reservation", call.ID)
		return budget.Settled, nil
	}
	return 0, budget.ErrUnknownReservation
}

// runSettle runs settle.lua for id in mode, in the next batch (batch.go);
// call nil charges the reserved amounts (the sweeper).
func (s *Store) runSettle(ctx context.Context, id string, mode settleMode, call *SettleCall) (settleOutcome, error) {
	if call == nil {
		call = &SettleCall{}
	}
	args := make([]any, 0, 7+3*len(call.Actual))
	args = append(args, id, s.nowArg(), s.opts.TombstoneTTL.Milliseconds(), int64(mode), string(call.Record), call.Epoch, len(call.Actual))
	for _, a := range call.Actual {
		args = append(args, a)
	}
	if len(call.Kinds) == len(call.Actual) && len(call.Buckets) == len(call.Actual) {
		for _, k := range call.Kinds {
			args = append(args, k)
		}
		for _, b := range call.Buckets {
			args = append(args, b)
		}
	}
	raw, err := s.batch.run(ctx, s.settleKeys(id), args)
	if err != nil {
		if isScriptError(err) {
			return 0, fmt.Errorf("redisstore: settle: %w", err)
		}
		return 0, unavailable("settle", err)
	}
	if len(raw) != 1 {
		return 0, fmt.Errorf("redisstore: settle: reply %v", raw)
	}
	return settleOutcome(raw[0]), nil
}

// kindArg is a limit kind as the scripts spell it.
func kindArg(k budget.Kind) string {
	switch k {
	case budget.Rate:
		return kRate // peek reads a window as a token bucket too: its token state is empty
	case budget.Ceiling:
		return kCeiling
	}
	return kConcurrency
}

// Extend implements budget.Store.
func (s *Store) Extend(ctx context.Context, id string, lease time.Duration) error {
	ids := s.partsOf(id)
	if ids == nil {
		return s.extendPart(ctx, id, lease)
	}
	for _, pid := range ids {
		if err := s.extendPart(ctx, pid, lease); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) extendPart(ctx context.Context, id string, lease time.Duration) error {
	if s.lease != nil && s.lease.extend(id, lease) {
		s.mu.Lock()
		_, exactToo := s.open[id]
		s.mu.Unlock()
		if !exactToo {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	tag := s.tag(budget.PartitionOf(id))
	var n int64
	err := s.do(func() (err error) {
		n, err = extendScript.Run(ctx, s.rdb, []string{tag + "open", tag + "leases", tag + "res:" + id}, id, lease.Microseconds(), s.nowArg()).Int64()
		return err
	})
	if err != nil {
		return unavailable("extend", err)
	}
	if n == 0 {
		return budget.ErrUnknownReservation
	}
	return nil
}

// sweepBatch bounds one look-up of expired leases.
const sweepBatch = 100

// Sweep implements budget.Store: every expired lease of every known
// partition is charged at its reserved amounts. Any instance may sweep; a
// reservation is resolved once whoever gets there first.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	s.mu.Lock()
	parts := make([]string, 0, len(s.partitions)+1)
	for p := range s.partitions {
		parts = append(parts, p)
	}
	s.mu.Unlock()
	if len(parts) == 0 {
		parts = append(parts, "")
	}
	n := 0
	if s.lease != nil {
		// Local reservations first; then a flush charges them and renews
		// this instance's own lessee record, which the sweep below must
		// not take for a dead one's.
		n += s.lease.sweep()
		if err := s.lease.flushAll(ctx); err != nil {
			return n, err
		}
	}
	for _, p := range parts {
		tag := s.tag(p)
		if s.lease != nil {
			if _, err := s.lease.expireLessees(ctx, p); err != nil {
				return n, err
			}
		}
		for {
			var ids []string
			err := s.do(func() (err error) {
				ids, err = expiredScript.Run(ctx, s.rdb, []string{tag + "leases"}, s.nowArg(), sweepBatch).StringSlice()
				return err
			})
			if err != nil {
				return n, unavailable("sweep", err)
			}
			for _, id := range ids {
				o, err := s.runSettle(ctx, id, modeExpire, nil)
				if err != nil {
					return n, err
				}
				if o == settleSettled {
					n++
				}
				// s.open keeps the debits of this instance's own swept
				// reservation: its settlement, if it comes late, carries
				// the actual amounts that correct the sweep's charge.
			}
			if len(ids) < sweepBatch {
				break
			}
		}
	}
	return n, nil
}

// Peek implements budget.Store: one script call per partition (or shard)
// the limits keep their state in.
func (s *Store) Peek(ctx context.Context, limits []budget.Limit) ([]budget.Status, error) {
	groups := byPartition(limits)
	if len(groups) <= 1 {
		return s.peek(ctx, limits)
	}
	out := make([]budget.Status, len(limits))
	for _, g := range groups {
		ls := make([]budget.Limit, len(g))
		for j, i := range g {
			ls[j] = limits[i]
		}
		st, err := s.peek(ctx, ls)
		if err != nil {
			return nil, err
		}
		for j, i := range g {
			out[i] = st[j]
		}
	}
	return out, nil
}

// peek reads limits that all keep their state in one partition.
func (s *Store) peek(ctx context.Context, limits []budget.Limit) ([]budget.Status, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	partition := partitionOf(&limits[0])
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	now := s.now()
	debits := make([]budget.Debit, len(limits))
	for i := range limits {
		debits[i] = budget.Debit{Limit: limits[i]}
	}
	budget.SetPeriods(debits, now)
	tag := s.tag(partition)
	keys := make([]string, 1, 1+len(debits))
	keys[0] = tag + "ceilings"
	args := []any{s.nowArg()}
	for i := range debits {
		keys = append(keys, s.bucketKey(tag, &debits[i]))
		k := kindArg(debits[i].Limit.Kind)
		switch debits[i].Limit.Algorithm {
		case budget.SlidingLog:
			k = kLog
		case budget.FixedWindow, budget.SlidingWindow:
			k = kCeiling // a window's current counter (a sliding window's previous one is not read here)
		}
		args = append(args, k)
	}
	for i := range debits {
		switch l := &debits[i].Limit; {
		case l.Algorithm == budget.SlidingLog:
			args = append(args, l.Window.Microseconds()) // a log's window, in the name slot
		case l.Kind == budget.Ceiling:
			args = append(args, l.Bucket) // its run-time ceiling's field
		default:
			args = append(args, "")
		}
	}
	var raw []int64
	err := s.do(func() (err error) {
		raw, err = peekScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
		return err
	})
	if err != nil {
		return nil, unavailable("peek", err)
	}
	if len(raw) != 1+5*len(debits) {
		return nil, fmt.Errorf("redisstore: peek: reply of %d values for %d limits", len(raw), len(debits))
	}
	counters := decodeCounters(raw[1:], len(debits))
	if s.lease != nil {
		s.lease.adjust(partition, keys[1:], counters)
	}
	return budget.StatusOf(debits, counters, time.UnixMicro(raw[0])), nil
}

// SetCeiling implements budget.Store: one HSET (or HDEL) that every
// instance's next reservation reads in its script. A temporary override is
// kept as "amount@until" (unix µs); the scripts ignore it from until on, by
// the same clock they charge periods with.
func (s *Store) SetCeiling(ctx context.Context, partition, bucket string, amount int64, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	key := s.tag(partition) + "ceilings"
	cmd := s.rdb.(redis.Cmdable)
	err := s.do(func() error {
		if amount < 0 {
			return cmd.HDel(ctx, key, bucket).Err()
		}
		if until.IsZero() {
			return cmd.HSet(ctx, key, bucket, amount).Err()
		}
		return cmd.HSet(ctx, key, bucket, strconv.FormatInt(amount, 10)+"@"+strconv.FormatInt(until.UnixMicro(), 10)).Err()
	})
	if err != nil {
		return unavailable("setting a ceiling", err)
	}
	if s.lease != nil {
		// This instance's next reservation sees the change at once; others
		// at their next flush (a slice they hold meanwhile was taken under
		// the old ceiling).
		return s.lease.flush(ctx, partition, nil)
	}
	return nil
}

// Override implements budget.Store: one HGET, judged by this process's
// clock (or Options.Now); the scripts judge by Redis's, so around the
// expiry the two may disagree for the clock skew.
func (s *Store) Override(ctx context.Context, partition, bucket string) (int64, time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var v string
	err := s.do(func() (err error) {
		v, err = s.rdb.(redis.Cmdable).HGet(ctx, s.tag(partition)+"ceilings", bucket).Result()
		if errors.Is(err, redis.Nil) {
			v, err = "", nil
		}
		return err
	})
	if err != nil {
		return 0, time.Time{}, false, unavailable("reading a ceiling", err)
	}
	if v == "" {
		return 0, time.Time{}, false, nil
	}
	a, u, temporary := strings.Cut(v, "@")
	amount, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("redisstore: ceiling of %s: bad value %q", bucket, v)
	}
	if !temporary {
		return amount, time.Time{}, true, nil
	}
	us, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("redisstore: ceiling of %s: bad value %q", bucket, v)
	}
	now := s.now()
	if until := time.UnixMicro(us); now.Before(until) {
		return amount, until, true, nil
	}
	return 0, time.Time{}, false, nil
}

// ResetSpent implements budget.Store: the current period is the one the
// store's clock (or Options.Now) is in, as for Peek.
func (s *Store) ResetSpent(ctx context.Context, l budget.Limit) (string, int64, error) {
	if err := s.flushFor(ctx, partitionOf(&l)); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	now := s.now()
	ds := []budget.Debit{{Limit: l}}
	budget.SetPeriods(ds, now)
	var was int64
	err := s.do(func() (err error) {
		was, err = resetScript.Run(ctx, s.rdb, []string{s.bucketKey(s.tag(partitionOf(&l)), &ds[0])}).Int64()
		return err
	})
	if err != nil {
		return "", 0, unavailable("resetting a period", err)
	}
	return ds[0].Period, was, nil
}

// RaiseSpent implements budget.Store.
func (s *Store) RaiseSpent(ctx context.Context, l budget.Limit, spent int64) (int64, error) {
	if spent < 0 {
		return 0, fmt.Errorf("redisstore: negative spend %d", spent)
	}
	if err := s.flushFor(ctx, partitionOf(&l)); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.SettleTimeout)
	defer cancel()
	ds := []budget.Debit{{Limit: l}}
	budget.SetPeriods(ds, s.now())
	var was int64
	err := s.do(func() (err error) {
		was, err = raiseScript.Run(ctx, s.rdb, []string{s.bucketKey(s.tag(partitionOf(&l)), &ds[0])}, spent, ceilingRetention(l.Period).Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return 0, unavailable("raising a period's spend", err)
	}
	return was, nil
}

// ErrPaceTooFar: the upstream's next free slot is further away than the
// caller would wait; nothing was taken.
var ErrPaceTooFar = errors.New("redisstore: the upstream's next slot is too far away")

// Pace takes the next slot of upstream's shared drain for a request that
// occupies interval of it, and returns how long to wait for that slot. All
// instances sharing the Redis share the drain, so together they send at the
// configured rate. A slot further than maxWait is not taken: the error is
// ErrPaceTooFar and wait says how far it was.
func (s *Store) Pace(ctx context.Context, upstream string, interval, maxWait time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	key := s.opts.Prefix + ":{pace:" + upstream + "}:drain"
	var raw []int64
	err := s.do(func() (err error) {
		raw, err = paceScript.Run(ctx, s.rdb, []string{key}, interval.Microseconds(), maxWait.Microseconds(), s.nowArg()).Int64Slice()
		return err
	})
	if err != nil {
		return 0, unavailable("pacing", err)
	}
	if raw[0] < 0 {
		return time.Duration(raw[1]) * time.Microsecond, ErrPaceTooFar
	}
	return time.Duration(raw[0]) * time.Microsecond, nil
}

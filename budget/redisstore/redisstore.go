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
	"crypto/rand"
	_ "embed"
	"encoding/hex"
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
	//go:embed setceiling.lua
	setCeilingLua string
	//go:embed lapse.lua
	lapseLua string
	//go:embed schedule.lua
	scheduleLua string

	reserveScript  = marked(kindsLua, overrideLua, reserveLua)
	settleScript   = marked(kindsLua, settleLua)
	extendScript   = redis.NewScript(extendLua)
	expiredScript  = redis.NewScript(expiredLua)
	peekScript     = redis.NewScript(kindsLua + overrideLua + peekLua)
	paceScript     = redis.NewScript(paceLua)
	resetScript    = redis.NewScript(resetLua)
	raiseScript    = redis.NewScript(raiseLua)
	ceilingScript  = marked(setCeilingLua)
	lapseScript    = marked(lapseLua)
	scheduleScript = marked(scheduleLua)
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
	// Instance names this process in Redis: its write marks (marks.go)
	// and its lessee record (default: random).
	Instance string
	// ReplayWindow is how long this process keeps each call Redis
	// acknowledged, to run it again if Redis loses it (default 10 s): a
	// failover to a replica that lagged by less loses nothing. Past it the
	// org is refused until OnLost's rebuild calls Rebuilt.
	ReplayWindow time.Duration
	// FailoverFence is how long a partition takes no new room after its
	// node took over from another, or after an instance found Redis lost
	// its writes (default 2 s): the time every instance has to find and
	// replay its own lost writes (a lease flush, CheckMarks).
	FailoverFence time.Duration
	// OnLost is told of an org whose budget state Redis lost beyond what
	// this process can replay; its requests are refused (fail closed)
	// until Rebuilt. Called once per loss, from the call that found it.
	OnLost func(partition string)
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
	// gone is set when a call failed for another reason than time (a
	// refused or reset connection: Redis away, perhaps restarting without
	// its data), cleared when one is answered. A stall (calls timing out)
	// does not set it: leased slices are then still held in Redis.
	gone atomic.Bool

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

	marks      *marks // this process's write marks, and what it would replay
	lostWrites atomic.Int64
}

// openReservation is what this process remembers of a reservation it made:
// the debits taken and its partition's epoch then.
type openReservation struct {
	debits []budget.Debit
	epoch  int64
}

var _ budget.Backend = (*Store)(nil)

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
	if opts.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.Instance = hex.EncodeToString(b[:])
	}
	if opts.ReplayWindow <= 0 {
		opts.ReplayWindow = 10 * time.Second
	}
	if opts.FailoverFence <= 0 {
		opts.FailoverFence = 2 * time.Second
	}
	s := &Store{rdb: rdb, opts: opts, open: map[string]openReservation{}, parts: map[string][]string{}, partitions: map[string]struct{}{}}
	s.batch.s = s
	s.marks = newMarks(s, opts.Instance, opts.ReplayWindow, opts.FailoverFence)
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
		lo := *opts.Leases
		if lo.Instance == "" {
			lo.Instance = opts.Instance
		}
		s.lease = newLeaser(s, lo)
	}
	return s
}

// flushFor charges what this instance spent of partition's buckets, before
// an operation that reads or rewrites the spend in Redis.
func (s *Store) flushFor(ctx context.Context, partition string) error {
	if s.lease == nil || s.marks.isLost(partition) {
		return nil // a lost org's spend is rebuilt from the ledger; its flush waits until then
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
	case budget.Ceiling, budget.Meter:
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
		switch {
		case isAnswer(err):
			s.answered.Store(time.Now().UnixNano())
			s.gone.Store(false)
		case !isTimeout(err) && !errors.Is(err, context.Canceled):
			s.gone.Store(true) // refused, reset, closed: not merely slow
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

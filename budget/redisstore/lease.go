package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

var (
	//go:embed lease.lua
	leaseLua string
	//go:embed lessee_expire.lua
	lesseeExpireLua string

	leaseScript        = redis.NewScript(kindsLua + overrideLua + leaseLua)
	lesseeExpireScript = redis.NewScript(kindsLua + lesseeExpireLua)
)

// LeaseOptions turn budget leases on: the store leases slices of each
// bucket's remaining capacity from Redis and admits requests against them
// in this process, all or nothing across every limit of the request, with
// no round trip; settlements are applied here and flushed to Redis in one
// script call per partition every Flush. A slice counts in Redis as used
// (pending, in flight, or taken from a token bucket), so every instance's
// reservations see it and the ceiling holds across instances by
// construction.
//
// Leased: ceilings (budgets of every unit, and their meters), token-bucket
// rates and concurrency limits — each is one counter whose room can be
// split. Exact per request: fixed and sliding windows and sliding logs
// (their counters belong to one window and the log keeps every request),
// and shadow limits (they must see every request as it is). A request with
// any of those has its leasable limits admitted here and the rest reserved
// in Redis, all or nothing; a request a slice cannot hold is reserved
// exactly, as without leases.
//
// A crashed instance's slices are charged in full once its lessee record
// expires (TTL after its last flush): the most a crash costs a bucket is
// one slice, and a slice is at most its bucket's room divided among the
// live instances plus one.
type LeaseOptions struct {
	// Instance names this process's lessee record (default: random).
	Instance string
	// Flush is how often spend is flushed and slices are renewed (default
	// 200 ms): how stale another instance's view of this one's spend is.
	Flush time.Duration
	// TTL is how long slices outlive the last flush before a sweeper
	// charges them (default 10 s). Requests are admitted locally only
	// while the last flush reached Redis and is younger than TTL/2: once a
	// flush fails, every request is reserved exactly, and fails closed, so
	// a Redis that goes away is noticed within one Flush.
	TTL time.Duration
}

// leaser is the store's local admission against its slices.
type leaser struct {
	s    *Store
	opts LeaseOptions

	mu     sync.Mutex
	parts  map[string]*partLease
	local  map[string]*localReservation // admitted here, not yet settled
	swept  map[string]*localReservation // charged in full by the local sweep
	health time.Time                    // the last flush that reached Redis
	failed bool                         // a flush failed since: Redis may be away

	stats LeaseStats // under mu
}

// LeaseStats count what a leased store did since it started.
type LeaseStats struct {
	// Local, Hybrid and Exact count reservations admitted against this
	// process's slices, admitted in part here and in part in Redis (a
	// request with a window or a shadow limit), and reserved in Redis as
	// a whole (near a ceiling, or a request a slice could not hold).
	Local, Hybrid, Exact int64
	// Calls and Failures count lease calls, and those that failed.
	Calls, Failures int64
	// Slices is how many buckets this process holds a slice of now.
	Slices int
}

// LeaseStats reports the store's lease counts; ok is false without leases.
func (s *Store) LeaseStats() (st LeaseStats, ok bool) {
	if s.lease == nil {
		return st, false
	}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	st = s.lease.stats
	for _, p := range s.lease.parts {
		st.Slices += len(p.slices)
	}
	return st, true
}

// counted notes how a reservation was admitted.
func (lz *leaser) counted(n *int64) {
	lz.mu.Lock()
	*n++
	lz.mu.Unlock()
}

// partLease is one partition's slices.
type partLease struct {
	call     sync.Mutex // one lease call at a time
	slices   map[string]*slice
	dropping map[string]op    // slices given up, until Redis confirms
	pending  map[string]int64 // spend for a slice being dropped: the next one's
	entries  []any            // ledger entries (JSON, outcome) not yet flushed
	epoch    int64            // the partition's epoch at the last lease call (under call)
	lessees  int64            // the live lessees the last call counted
}

// slice is what this process holds of one bucket. Units: a ceiling's or
// a meter's own; concurrency slots; a token bucket's µs of cost.
type slice struct {
	kind    string
	limit   budget.Limit
	debit   budget.Debit // the last debit seen: its period and limit
	granted int64        // held in Redis for this process
	held    int64        // reserved by requests in flight here
	spent   int64        // all settled here, ever (flushed is what Redis has)
	flushed int64
	demand  int64 // reserved since the last periodic flush
	rate    int64 // reserved in the interval before that: the demand per Flush
	biggest int64 // the largest single reservation in those two intervals
	view    budget.Counters
	until   int64 // when view's run-time ceiling lapses (unix µs; 0: never)
	denied  bool  // a take was refused: reserve exactly until the next flush
	near    bool  // the bucket's room is under a slice per lessee: reserve exactly
}

func (sl *slice) free() int64 {
	if sl.kind == kConcurrency {
		return sl.granted - sl.held
	}
	return sl.granted - sl.held - (sl.spent - sl.flushed)
}

type localReservation struct {
	partition string
	debits    []budget.Debit
	keys      []string
	kinds     []string
	amounts   []int64 // in slice units
	expires   time.Time
	entry     *budget.Entry
}

func newLeaser(s *Store, o LeaseOptions) *leaser {
	if o.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.Instance = hex.EncodeToString(b[:])
	}
	if o.Flush <= 0 {
		o.Flush = 200 * time.Millisecond
	}
	if o.TTL <= 0 {
		o.TTL = 10 * time.Second
	}
	return &leaser{s: s, opts: o, parts: map[string]*partLease{}, local: map[string]*localReservation{},
		swept: map[string]*localReservation{}, health: s.now()}
}

// leasable tells a debit this process can admit against a slice.
func leasable(d *budget.Debit) (kind string, ok bool) {
	l := &d.Limit
	switch {
	case l.Kind == budget.Ceiling && l.Meter:
		return kMeter, true
	case l.Shadow:
		return "", false
	case l.Kind == budget.Ceiling:
		return kCeiling, true
	case l.Kind == budget.Concurrency:
		return kConcurrency, true
	case l.Kind == budget.Rate && l.Algorithm == budget.TokenBucket:
		return kRate, true
	}
	return "", false
}

// units is amount of d's unit in its slice's units.
func units(kind string, l *budget.Limit, amount int64) (int64, error) {
	switch kind {
	case kRate:
		return budget.RateCost(l, amount)
	}
	return amount, nil // a meter's is what a sweep charges; it holds nothing back
}

// reserve admits r against this process's slices. A request with limits
// that stay exact (windows, logs, shadow limits) has its leasable limits
// admitted here and the rest reserved in Redis, all or nothing: if Redis
// refuses, the local part is given back. handled is false when r must be
// reserved exactly as a whole.
func (lz *leaser) reserve(ctx context.Context, r *budget.Reservation) (res budget.Result, handled bool, err error) {
	var leased, exact []int
	for i := range r.Debits {
		d := &r.Debits[i]
		if k, ok := leasable(d); ok && (k != kRate || d.Amount <= d.Limit.Capacity()) {
			leased = append(leased, i)
		} else {
			exact = append(exact, i) // a token bucket too small for the request: the exact path says so
		}
	}
	if len(leased) == 0 {
		return res, false, nil
	}
	if len(exact) == 0 {
		res, ok, err := lz.reserveLocal(ctx, r)
		if ok {
			lz.counted(&lz.stats.Local)
		}
		return res, ok, err
	}
	local := &budget.Reservation{ID: r.ID, Debits: pick(r.Debits, leased), Lease: r.Lease, Entry: r.Entry}
	resL, ok, err := lz.reserveLocal(ctx, local)
	if err != nil || !ok {
		return resL, err != nil, err
	}
	resX, err := lz.s.reserveExact(ctx, &budget.Reservation{ID: r.ID, Debits: pick(r.Debits, exact), Lease: r.Lease, Entry: r.Entry})
	if err != nil || !resX.Allowed {
		lz.release(r.ID)
	} else {
		lz.counted(&lz.stats.Hybrid)
	}
	return merge(len(r.Debits), leased, resL, exact, resX), true, err
}

// pick is debits at indices, copied.
func pick(debits []budget.Debit, indices []int) []budget.Debit {
	out := make([]budget.Debit, len(indices))
	for j, i := range indices {
		out[j] = debits[i]
	}
	return out
}

// merge is one result for n limits from the leased part's and the exact
// part's: statuses in the request's order; the exact part decides a
// refusal; when allowed, the decider is the limit with the least room left
// relative to its capacity (as budget.Evaluate's).
func merge(n int, leased []int, l budget.Result, exact []int, x budget.Result) budget.Result {
	out := budget.Result{Allowed: x.Allowed, Decider: -1, RetryAfter: x.RetryAfter, Status: make([]budget.Status, n)}
	for j, i := range leased {
		if j < len(l.Status) {
			out.Status[i] = l.Status[j]
		}
	}
	for j, i := range exact {
		if j < len(x.Status) {
			out.Status[i] = x.Status[j]
		}
	}
	for _, j := range x.Shadowed {
		out.Shadowed = append(out.Shadowed, exact[j])
	}
	if !x.Allowed {
		if x.Decider >= 0 {
			out.Decider = exact[x.Decider]
		}
		return out
	}
	least := 2.0
	for i, st := range out.Status {
		f := 0.0
		if st.Capacity > 0 {
			f = float64(st.Remaining) / float64(st.Capacity)
		}
		if f < least {
			least, out.Decider = f, i
		}
	}
	return out
}

// reserveLocal admits r, whose limits are all leasable, against this
// process's slices; ok is false when it must be reserved exactly.
func (lz *leaser) reserveLocal(ctx context.Context, r *budget.Reservation) (res budget.Result, ok bool, err error) {
	now := lz.s.now()
	budget.SetPeriods(r.Debits, now)
	partition := budget.PartitionOf(r.ID)
	tag := lz.s.tag(partition)
	lr := &localReservation{partition: partition, debits: r.Debits, keys: make([]string, len(r.Debits)),
		amounts: make([]int64, len(r.Debits)), expires: now.Add(r.Lease), entry: r.Entry}
	kinds := make([]string, len(r.Debits))
	lr.kinds = kinds
	for i := range r.Debits {
		d := &r.Debits[i]
		kinds[i], _ = leasable(d)
		lr.keys[i] = lz.s.bucketKey(tag, d)
		if lr.amounts[i], err = units(kinds[i], &d.Limit, d.Amount); err != nil {
			return res, false, err
		}
	}
	for attempt := 0; ; attempt++ {
		res, want, ok := lz.admit(r, lr, kinds, now)
		if ok || want == nil {
			return res, ok, nil // admitted, or to be reserved exactly as it is
		}
		if err := lz.flush(ctx, partition, want); err != nil {
			return budget.Result{Decider: -1}, false, err
		}
		if attempt > 0 || !slices.ContainsFunc(slices.Collect(maps.Values(want)), func(n int64) bool { return n > 0 }) {
			return res, false, nil // a second miss, or slices given back: reserve exactly
		}
	}
}

// standsInTheWay tells whether this process holds free slices of any of
// r's buckets, and if so gives them back, so that an exact reservation the
// slices made fail can be tried again.
func (lz *leaser) standsInTheWay(ctx context.Context, r *budget.Reservation) bool {
	partition := budget.PartitionOf(r.ID)
	tag := lz.s.tag(partition)
	keys := make([]string, len(r.Debits))
	for i := range r.Debits {
		keys[i] = lz.s.bucketKey(tag, &r.Debits[i])
	}
	lz.mu.Lock()
	back := lz.giveBack(lz.part(partition), keys)
	lz.mu.Unlock()
	return back != nil && lz.flush(ctx, partition, back) == nil
}

// release gives back a local reservation that will not be used (the exact
// part of its request was refused): as if it never was.
func (lz *leaser) release(id string) {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	lr := lz.local[id]
	if lr == nil {
		return
	}
	p := lz.part(lr.partition)
	for i, key := range lr.keys {
		if sl := p.slices[key]; sl != nil {
			sl.held -= lr.amounts[i]
			sl.demand -= lr.amounts[i]
		}
	}
	delete(lz.local, id)
}

// admit takes lr from the slices if every one has room. Otherwise want
// says, per bucket key, what a short bucket needs, or 0 for a slice to
// give back before the request is reserved exactly (the last view of Redis
// refused it); nil: reserve exactly, nothing to ask.
func (lz *leaser) admit(r *budget.Reservation, lr *localReservation, kinds []string, now time.Time) (budget.Result, map[string]int64, bool) {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	if lz.local[r.ID] != nil || lz.s.settledHere(r.ID) {
		return budget.Result{Decider: -1}, nil, false // the exact path reports the duplicate
	}
	// Slices are trusted while the last flush reached Redis and is younger
	// than TTL/2 (a sweeper charges them at TTL). Otherwise they are
	// renewed first: a failed call may have run, so only Redis's record
	// says what is held; if Redis is away, the renewal fails and the
	// request is reserved exactly, and fails closed.
	stale := lz.failed || lz.s.now().Sub(lz.health) > lz.opts.TTL/2
	p := lz.part(lr.partition)
	var lacking map[string]int64
	for i, key := range lr.keys {
		if _, ok := p.dropping[key]; ok {
			return budget.Result{Decider: -1}, nil, false // until Redis confirms the drop: exactly
		}
		sl := p.slices[key]
		if sl == nil {
			sl = &slice{kind: kinds[i], limit: r.Debits[i].Limit}
			p.slices[key] = sl
		}
		sl.limit, sl.debit = r.Debits[i].Limit, r.Debits[i]
		if need := lr.amounts[i]; sl.kind != kMeter && (stale || sl.free() < need) {
			if lacking == nil {
				lacking = map[string]int64{}
			}
			lacking[key] = need
			if sl.denied || sl.near {
				// Redis refused this bucket a take since the last flush:
				// do not ask again, reserve exactly — with the slices
				// given back and the spend flushed first, so the exact
				// reservation sees the bucket as it is.
				return budget.Result{Decider: -1}, lz.giveBack(p, lr.keys), false
			}
		}
	}
	if lacking != nil {
		return budget.Result{Decider: -1}, lacking, false
	}
	counters := make([]budget.Counters, len(lr.keys))
	for i, key := range lr.keys {
		counters[i] = p.slices[key].counters()
		if u := p.slices[key].until; u > 0 && now.UnixMicro() >= u {
			counters[i].Override, counters[i].HasOverride = 0, false // lapsed since
		}
	}
	res, err := budget.Evaluate(r.Debits, counters, now)
	if err != nil || !res.Allowed || len(res.Shadowed) > 0 {
		// The last view of Redis says no (a ceiling lowered at run time,
		// say): give the slices back, so they do not stand in the way, and
		// let the exact path decide and explain.
		return budget.Result{Decider: -1}, lz.giveBack(p, lr.keys), false
	}
	for i, key := range lr.keys {
		sl := p.slices[key]
		sl.held += lr.amounts[i]
		sl.demand += lr.amounts[i]
		sl.biggest = max(sl.biggest, lr.amounts[i])
	}
	lz.local[r.ID] = lr
	return res, nil, true
}

// giveBack is the want of a flush that gives back the free slices of keys
// and charges their spend, if any holds either; nil if none does.
func (lz *leaser) giveBack(p *partLease, keys []string) map[string]int64 {
	var back map[string]int64
	for _, key := range keys {
		if sl := p.slices[key]; sl != nil && (sl.free() > 0 || sl.spent != sl.flushed) {
			if back == nil {
				back = make(map[string]int64, len(keys))
			}
			back[key] = 0
		}
	}
	return back
}

// counters is the bucket as the last flush saw it, with this process's
// slice replaced by what its requests use of it.
func (sl *slice) counters() budget.Counters {
	c := sl.view
	unflushed := sl.spent - sl.flushed
	switch sl.kind {
	case kCeiling, kMeter:
		c.Spent += unflushed
		c.Pending = max(0, c.Pending-sl.granted+sl.held)
	case kConcurrency:
		c.InFlight = max(0, c.InFlight-sl.granted+sl.held)
	case kRate:
		c.TAT -= sl.free()
	}
	return c
}

func (lz *leaser) part(partition string) *partLease {
	p := lz.parts[partition]
	if p == nil {
		p = &partLease{slices: map[string]*slice{}, dropping: map[string]op{}, pending: map[string]int64{}}
		lz.parts[partition] = p
	}
	return p
}

// settle resolves a reservation admitted here; handled is false for one
// that was not.
func (lz *leaser) settle(id string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, bool, error) {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	lr, open := lz.local[id]
	swept := lz.swept[id]
	if !open && swept == nil {
		return 0, false, nil
	}
	if swept != nil {
		lr = swept
	}
	p := lz.part(lr.partition)
	for i, key := range lr.keys {
		used, err := units(lr.kinds[i], &lr.debits[i].Limit, actual.Of(lr.debits[i].Limit.Unit))
		if err != nil {
			return 0, true, err
		}
		if swept != nil {
			// The local sweep charged the reservation in full: correct
			// that to the actual amount, once (ceilings and meters; as
			// budget.CorrectSwept, rate state has moved on since). The
			// slice may have gone idle and away meanwhile.
			if k := lr.kinds[i]; k == kCeiling || k == kMeter {
				lz.spend(p, key, k, lr.debits[i], used-lr.amounts[i])
			}
			continue
		}
		sl := p.slices[key] // held by this reservation: never dropped meanwhile
		if sl == nil {
			// Cannot happen (a slice with requests in flight stays); if it
			// did, the spend must still be counted.
			if k := lr.kinds[i]; k != kConcurrency {
				lz.spend(p, key, k, lr.debits[i], used)
			}
			continue
		}
		sl.held -= lr.amounts[i]
		if sl.kind != kConcurrency {
			sl.spent += used
		}
	}
	o := budget.Settled
	if swept != nil {
		o = budget.Corrected
		delete(lz.swept, id)
	} else {
		delete(lz.local, id)
	}
	lz.s.rememberSettled(id)
	if len(rec) > 0 {
		code := settleSettled
		if o == budget.Corrected {
			code = settleCorrected
		}
		p.entries = append(p.entries, string(rec), int64(code))
	}
	return o, true, nil
}

// spend adds units spent to key's slice, making one if the bucket went
// idle and away; while its drop is unconfirmed, the spend waits for the
// slice made after. Requires lz.mu.
func (lz *leaser) spend(p *partLease, key, kind string, d budget.Debit, units int64) {
	if _, ok := p.dropping[key]; ok {
		p.pending[key] += units
		return
	}
	sl := p.slices[key]
	if sl == nil {
		sl = &slice{kind: kind, limit: d.Limit, debit: d}
		p.slices[key] = sl
	}
	sl.spent += units
}

// extend renews a local reservation's lease.
func (lz *leaser) extend(id string, lease time.Duration) bool {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	lr := lz.local[id]
	if lr != nil {
		lr.expires = lz.s.now().Add(lease)
	}
	return lr != nil
}

// sweep charges local reservations whose lease ran out at their reserved
// amounts, as the Redis sweeper does exact ones.
func (lz *leaser) sweep() int {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	now := lz.s.now()
	for id, lr := range lz.swept {
		if now.After(lr.expires.Add(lz.s.opts.TombstoneTTL)) {
			delete(lz.swept, id) // as long as Redis keeps a swept reservation's tombstone
		}
	}
	n := 0
	for id, lr := range lz.local {
		if now.Before(lr.expires) {
			continue
		}
		p := lz.part(lr.partition)
		for i, key := range lr.keys {
			if sl := p.slices[key]; sl != nil {
				sl.held -= lr.amounts[i]
				if sl.kind != kConcurrency {
					sl.spent += lr.amounts[i]
				}
			}
		}
		if lr.entry != nil && lz.s.opts.Ledger {
			if rec, err := json.Marshal(lr.entry); err == nil {
				p.entries = append(p.entries, string(rec), int64(settleExpired))
			}
		}
		delete(lz.local, id)
		lz.swept[id] = lr
		n++
	}
	return n
}

// op is one bucket of a lease call. target, floor and fallback are
// absolute slices (lease.lua).
type op struct {
	key, kind               string
	spent, seen             int64
	target, floor, fallback int64
	capacity                int64
	name                    string
	expiry                  int64 // ms on the clock of now
	drop                    bool
	debit                   budget.Debit // the bucket's (for a slice made again after a drop)
	given                   int64        // withheld from local use while the call is out
	asked                   bool         // a take a request waits for
}

// flush runs one lease call for partition: spend settled here is charged,
// slices are renewed or given back, and lacking buckets (key → the amount
// a request needs) get a take of at least that.
func (lz *leaser) flush(ctx context.Context, partition string, lacking map[string]int64) error {
	lz.mu.Lock()
	p := lz.part(partition)
	lz.mu.Unlock()
	p.call.Lock()
	defer p.call.Unlock()

	lz.mu.Lock()
	if lacking != nil && lz.satisfied(p, lacking) {
		lz.mu.Unlock()
		return nil // a call made while this one waited got the room
	}
	now := lz.s.now()
	keys := make([]string, 0, len(p.slices))
	for k := range p.slices {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ops := make([]op, 0, len(keys)+len(p.dropping))
	for _, key := range keys {
		sl := p.slices[key]
		o := lz.plan(p, key, sl, lacking, now)
		if o.drop {
			// Done with it: from here on only Redis holds it, until the
			// drop (safe to send again) is confirmed.
			delete(p.slices, key)
			p.dropping[key] = o
			continue
		}
		sl.granted -= o.given // not to be admitted against while it may be given back
		ops = append(ops, o)
	}
	for _, o := range p.dropping {
		ops = append(ops, o)
	}
	entries := p.entries
	p.entries = nil
	lz.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}

	raw, err := lz.call(ctx, partition, p.epoch, ops, entries)
	lz.mu.Lock()
	defer lz.mu.Unlock()
	lz.stats.Calls++
	if err != nil {
		lz.stats.Failures++
		for _, o := range ops {
			if sl := p.slices[o.key]; sl != nil && !o.drop {
				sl.granted += o.given // Redis's record says what is held; the next call reads it
			}
		}
		p.entries = append(entries, p.entries...)
		lz.failed = lz.failed || errors.Is(err, budget.ErrStoreUnavailable)
		return err
	}
	lz.health, lz.failed, p.epoch, p.lessees = lz.s.now(), false, raw[2], raw[1]
	lz.s.mu.Lock()
	lz.s.partitions[partition] = struct{}{}
	lz.s.mu.Unlock()
	for i, o := range ops {
		if o.drop {
			delete(p.dropping, o.key)
			if u, ok := p.pending[o.key]; ok {
				delete(p.pending, o.key)
				lz.spend(p, o.key, o.kind, o.debit, u)
			}
			continue
		}
		sl := p.slices[o.key]
		v := raw[3+leaseReplyFields*i:]
		sl.granted, sl.flushed, sl.until = v[0], o.spent, v[6]
		sl.view = budget.Counters{TAT: v[1], Spent: v[2], Pending: v[3], InFlight: v[4], Override: v[5], HasOverride: v[5] >= 0}
		sl.denied = o.asked && sl.free() < lacking[o.key]
	}
	return nil
}

// satisfied tells whether every take in lacking is already met (a give-back
// never is, nor anything while the slices are stale). Requires lz.mu.
func (lz *leaser) satisfied(p *partLease, lacking map[string]int64) bool {
	if lz.failed || lz.s.now().Sub(lz.health) > lz.opts.TTL/2 {
		return false
	}
	for key, need := range lacking {
		if sl := p.slices[key]; need == 0 || sl == nil || sl.free() < need {
			return false
		}
	}
	return true
}

// nearCeiling tells whether the bucket's unclaimed room, as the last call
// saw it, is under one slice of want per lessee.
func (sl *slice) nearCeiling(want, lessees int64, now time.Time) bool {
	var room int64
	switch v := &sl.view; sl.kind {
	case kCeiling:
		capacity := sl.limit.Amount
		if v.HasOverride {
			capacity = v.Override
		}
		room = capacity - v.Spent - v.Pending
	case kConcurrency:
		room = sl.limit.Amount - v.InFlight
	case kRate:
		tol, _ := budget.RateCost(&sl.limit, sl.limit.Capacity())
		room = now.UnixMicro() + tol - max(v.TAT, now.UnixMicro())
	default:
		return false
	}
	return room < max(1, lessees)*want
}

// plan is one slice's part of a lease call: a periodic one (lacking nil)
// renews every slice by its demand; one a request waits for only takes
// what lacking asks or gives back. Requires lz.mu.
func (lz *leaser) plan(p *partLease, key string, sl *slice, lacking map[string]int64, now time.Time) op {
	o := op{key: key, kind: sl.kind, spent: sl.spent, seen: sl.flushed, capacity: sl.limit.Amount, debit: sl.debit}
	switch sl.kind {
	case kRate:
		tol, _ := budget.RateCost(&sl.limit, sl.limit.Capacity())
		o.capacity = tol
	case kCeiling, kMeter:
		o.name = sl.limit.Bucket
		o.expiry = budget.PeriodEnd(sl.limit.Period, now, sl.limit.Location).UnixMilli() + ceilingRetention(sl.limit.Period).Milliseconds()
	}
	periodic := lacking == nil
	if periodic {
		sl.rate, sl.demand = sl.demand, 0
		if sl.rate == 0 {
			sl.biggest = 0
		}
	}
	// A bucket idle for a whole interval, or of a period that has ended
	// (never reserved again), goes for good once nothing is in flight or
	// unflushed: no slice and no record are kept for buckets not in use
	// (a bucket per client IP, say).
	past := (sl.kind == kCeiling || sl.kind == kMeter) && sl.debit.Period != budget.PeriodID(sl.limit.Period, now, sl.limit.Location)
	if (past || (periodic && sl.rate == 0)) && sl.held == 0 && sl.spent == sl.flushed {
		o.drop = true
		o.given = max(0, sl.granted)
		return o
	}
	if sl.kind == kMeter {
		return o
	}
	// The slice once this call has charged the spend: what it holds for
	// requests in flight and what is free.
	unflushed := sl.spent - sl.flushed
	if sl.kind == kConcurrency {
		unflushed = 0
	}
	after, free := max(0, sl.granted-unflushed), sl.free()
	want := max(2*max(sl.rate, sl.demand), 8*sl.biggest)
	o.target, o.fallback = after, sl.held
	need, asked := lacking[key]
	switch {
	case asked && (need == 0 || sl.denied):
		// In the way of an exact reservation; or Redis refused this
		// bucket a take since the request asked: near its ceiling, where
		// a new slice would only stand in the way of exact ones.
		o.target = sl.held
	case asked:
		o.target, o.floor, o.asked = sl.held+max(want, 2*need), sl.held+need, true
	case periodic && sl.rate == 0:
		o.target = sl.held // idle for a whole interval: give back everything not in use
	case periodic && sl.nearCeiling(want, p.lessees, now):
		// Slices shrink near a ceiling: a slice held here would make
		// other instances' exact reservations refuse ("held") while it
		// sits partly unused. Give it back; reserve exactly until the
		// room is back.
		o.target, sl.near = sl.held, true
	case periodic && (free < want/2 || free > 2*want):
		o.target = sl.held + want
	}
	if periodic && o.target != sl.held {
		sl.near = false
	}
	if o.target < after {
		o.given = after - o.target
	} else if o.asked {
		o.given = max(0, after-o.fallback)
	}
	return o
}

// appendTo writes o as lease.lua takes it: sliceFields values.
func (o *op) appendTo(args []any) []any {
	drop := "0"
	if o.drop {
		drop = "1"
	}
	return append(args, o.kind, o.spent, o.seen, max(0, o.target), max(0, o.floor), max(0, o.fallback), o.capacity, o.name, o.expiry, drop)
}

// call runs lease.lua.
func (lz *leaser) call(ctx context.Context, partition string, epoch int64, ops []op, entries []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, lz.s.opts.Timeout)
	defer cancel()
	tag := lz.s.tag(partition)
	keys := make([]string, 0, 4+len(ops))
	keys = append(keys, tag+"lessees", tag+"lessee:"+lz.opts.Instance, tag+"ceilings", tag+"ledger")
	args := make([]any, 0, 6+sliceFields*len(ops)+len(entries))
	args = append(args, lz.opts.Instance, lz.s.nowArg(), lz.opts.TTL.Microseconds(), len(ops), len(entries)/2, epoch)
	for i := range ops {
		keys = append(keys, ops[i].key)
		args = ops[i].appendTo(args)
	}
	args = append(args, entries...)
	var raw []int64
	err := lz.s.do(func() (err error) {
		raw, err = leaseScript.Run(ctx, lz.s.rdb, keys, args...).Int64Slice()
		return err
	})
	if err != nil {
		if isScriptError(err) {
			return nil, fmt.Errorf("redisstore: lease: %w", err)
		}
		return nil, unavailable("lease", err)
	}
	if len(raw) != 3+leaseReplyFields*len(ops) {
		return nil, fmt.Errorf("redisstore: lease: reply of %d values for %d buckets", len(raw), len(ops))
	}
	return raw, nil
}

// flushAll runs a lease call for every partition with slices.
func (lz *leaser) flushAll(ctx context.Context) error {
	lz.mu.Lock()
	parts := make([]string, 0, len(lz.parts))
	for p := range lz.parts {
		parts = append(parts, p)
	}
	lz.mu.Unlock()
	var errs []error
	for _, p := range parts {
		errs = append(errs, lz.flush(ctx, p, nil))
	}
	return errors.Join(errs...)
}

// adjust replaces, in counters read from Redis, this process's slices by
// what its requests use of them (Peek).
func (lz *leaser) adjust(partition string, keys []string, counters []budget.Counters) {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	p := lz.parts[partition]
	if p == nil {
		return
	}
	for i, key := range keys {
		if sl := p.slices[key]; sl != nil {
			view := sl.view
			sl.view = counters[i]
			counters[i] = sl.counters()
			sl.view = view
		}
	}
}

// expireLessees charges the slices of every instance of partition whose
// lessee record ran out.
func (lz *leaser) expireLessees(ctx context.Context, partition string) (int, error) {
	tag := lz.s.tag(partition)
	var ids []string
	err := lz.s.do(func() (err error) {
		ids, err = expiredScript.Run(ctx, lz.s.rdb, []string{tag + "lessees"}, lz.s.nowArg(), sweepBatch).StringSlice()
		return err
	})
	if err != nil {
		return 0, unavailable("sweeping lessees", err)
	}
	n := 0
	for _, id := range ids {
		var k int64
		err := lz.s.do(func() (err error) {
			k, err = lesseeExpireScript.Run(ctx, lz.s.rdb, []string{tag + "lessees", tag + "lessee:" + id}, id, lz.s.nowArg()).Int64()
			return err
		})
		if err != nil {
			return n, unavailable("sweeping lessees", err)
		}
		if k > 0 {
			n++
			lz.s.opts.Log.Warn("charged the slices of an instance that stopped renewing them", "partition", partition, "instance", id, "slices", k)
		}
	}
	return n, nil
}

// RunLeases flushes and renews this process's slices every Flush until ctx
// is done, then gives back what it can. It does nothing without leases.
func (s *Store) RunLeases(ctx context.Context) {
	if s.lease == nil {
		return
	}
	tick.Every(ctx, s.lease.opts.Flush, func(ctx context.Context) {
		if err := s.FlushLeases(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Warn("flushing budget leases", "err", err)
		}
	})
}

// FlushLeases runs one lease call per partition now: spend settled here
// is charged, slices renewed or given back (RunLeases does it every Flush).
func (s *Store) FlushLeases(ctx context.Context) error {
	if s.lease == nil {
		return nil
	}
	return s.lease.flushAll(ctx)
}

// ReturnLeases flushes what was spent here and gives back every slice not
// held by a request in flight (at shutdown, after the last request).
func (s *Store) ReturnLeases(ctx context.Context) error {
	if s.lease == nil {
		return nil
	}
	s.lease.mu.Lock()
	for _, p := range s.lease.parts {
		for _, sl := range p.slices {
			sl.demand = 0 // the periodic flush below finds it idle
		}
	}
	s.lease.mu.Unlock()
	return s.lease.flushAll(ctx)
}

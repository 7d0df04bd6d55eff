package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
)

var (
	//go:embed lease.lua
	leaseLua string
	//go:embed lessee_expire.lua
	lesseeExpireLua string

	leaseScript        = marked(kindsLua, overrideLua, leaseLua)
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
	// Instance names this process's lessee record (default: the store's
	// Options.Instance).
	Instance string
	// Flush is how often spend is flushed and slices are renewed (default
	// 200 ms): how stale another instance's view of this one's spend is.
	Flush time.Duration
	// TTL is how long slices outlive the last flush before a sweeper
	// charges them (default 10 s). Requests are admitted locally while
	// the last flush that reached Redis is younger than TTL/2: through a
	// stall (calls timing out) an instance goes on admitting against the
	// slices it holds, which Redis counts as pending whatever the stall.
	// A Redis that is gone (refused or reset connections: it may come back
	// without them) stops local admission at the first failed flush, and
	// requests fail closed.
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

// newLeaser is s's leaser; o.Instance is set (New gives it the store's).
func newLeaser(s *Store, o LeaseOptions) *leaser {
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
	case l.Kind == budget.Meter:
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
	// Slices are trusted while the last flush that reached Redis is
	// younger than TTL/2 (a sweeper charges them at TTL), unless Redis is
	// gone (failed). Otherwise they are renewed first; if Redis is away,
	// the renewal fails and the request is reserved exactly, and fails
	// closed. A failed call's give-backs stay given back here (it may have
	// run), so what is admitted against is held in Redis either way.
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

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

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
		// What the call gave back stays given back here: it may have run.
		// What it took is not counted: it may not have. Either way the
		// slices admitted against below are held in Redis, and the next
		// call that is answered says what is.
		p.entries = append(entries, p.entries...)
		// A stall (calls timing out) leaves the slices held in Redis:
		// requests go on being admitted against them, until they are older
		// than TTL/2. A Redis that is gone (refused, reset) may come back
		// without them, and an org whose state Redis lost is refused: then
		// local admission stops at once.
		lz.failed = lz.failed || errors.Is(err, ErrPartitionLost) ||
			(errors.Is(err, budget.ErrStoreUnavailable) && lz.s.gone.Load())
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
	raw, err := lz.s.marks.run(ctx, partition, leaseScript, keys, args, lz.s.send(leaseScript), func([]int64) []any { return args })
	if err != nil {
		if isScriptError(err) {
			return nil, fmt.Errorf("redisstore: lease: %w", err)
		}
		return nil, unavailable("lease", err)
	}
	if len(raw) != 3+leaseReplyFields*len(ops) {
		return nil, fmt.Errorf("redisstore: lease: reply of %d values for %d buckets", len(raw), len(ops))
	}
	lz.s.marks.sawEpoch(partition, raw[2])
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

// rebase forgets what Redis lost of partition's slices, after its budgets
// were rebuilt from the ledger: what was flushed is in the rebuilt spend,
// what was not is charged by the next call, and no slice is held.
func (lz *leaser) rebase(partition string) {
	lz.mu.Lock()
	p := lz.part(partition)
	lz.mu.Unlock()
	p.call.Lock()
	defer p.call.Unlock()
	lz.mu.Lock()
	defer lz.mu.Unlock()
	for _, sl := range p.slices {
		sl.spent -= sl.flushed
		sl.flushed, sl.granted = 0, 0
	}
	p.epoch = 0
}

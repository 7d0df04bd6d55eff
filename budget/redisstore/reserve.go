package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

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
		raw, err := s.marks.run(ctx, partition, reserveScript, keys, args, s.send(reserveScript), restoreArgs(args))
		if err != nil {
			if isScriptError(err) {
				return budget.Result{Decider: -1}, fmt.Errorf("redisstore: reserve: %w", err)
			}
			if errors.Is(err, ErrPartitionLost) {
				return budget.Result{Decider: -1}, err // refused before the script ran
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
		if reply.epoch != 0 {
			s.marks.sawEpoch(partition, reply.epoch)
		}
		switch reply.status {
		case reserveDuplicate:
			return budget.Result{Decider: -1}, budget.ErrDuplicateReservation
		case reserveFenced:
			return budget.Result{Decider: -1}, unavailable("reserve", ErrFenced)
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

// restoreArgs is what to replay of a reservation should Redis lose it: the
// same call as a restore, if it was taken.
func restoreArgs(args []any) func(reply []int64) []any {
	return func(reply []int64) []any {
		if len(reply) == 0 || reserveStatus(reply[0]) != reserveAllowed {
			return nil // nothing taken: nothing to restore
		}
		again := slices.Clone(args)
		again[5] = "1"
		return again
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
	args := make([]any, 0, 6+debitFields*len(r.Debits))
	args = append(args, r.ID, r.Lease.Microseconds(), s.nowArg(), len(r.Debits), entry, "0")
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
	case l.Kind == budget.Ceiling || l.Kind == budget.Meter:
		a.kind, a.name, a.keep = kCeiling, l.Bucket, ceilingRetention(l.Period)
		a.start, a.end = budget.PeriodStart(l.Period, now, l.Location).UnixMicro(), budget.PeriodEnd(l.Period, now, l.Location).UnixMicro()
		if l.Kind == budget.Meter {
			a.kind = kMeter // charged at settlement, never read here
		}
	case l.Kind == budget.Concurrency:
		a.kind = kConcurrency
	default:
		return a, fmt.Errorf("redisstore: limit %s: unknown kind", l.Bucket)
	}
	return a, nil
}

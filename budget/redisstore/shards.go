package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
)

// Sharded limits spread a hot key over Redis Cluster. Every key of a
// partition shares its hash tag, so all of one org's state sits on one
// master; a limit split into shards (budget.Limit.Shard) keeps shard k of
// partition p in the partition "p~k-1", hash tag {p~k-1}: a slot of its
// own, on whichever master owns it.
//
// A reservation whose debits all keep their state in one partition is one
// script call, as ever. One with debits in the partition and in a shard
// (an org's budgets and a request's shard of a busy rate limit) is split
// into parts, one per partition, each an atomic reservation of its own in
// its own slot: its own open record, lease, sweep, spool entry and epoch,
// under the id "<its partition>/<the rest of the id>". The shard's part is
// reserved first (it is the hot one, and most refusals of a hot key are its
// own, which then cost the partition nothing); the partition's part is
// reserved only if the shard's was allowed and, if refused, the shard's is
// given back. So the request takes all its limits or none, and the
// partition's ceilings stay exact; what two parts cannot give is one
// instant at which both were taken — a crash between them leaves the first
// part open until its lease ends and the sweeper charges it, as for any
// crash. The ledger entry goes with the partition's part.

// partitionOf is the partition l keeps its state in.
func partitionOf(l *budget.Limit) string {
	if l.Shard == 0 {
		return l.Partition
	}
	return l.Partition + "~" + strconv.Itoa(l.Shard-1)
}

// partID is the id of reservation id's part in partition.
func partID(id, partition string) string {
	if budget.PartitionOf(id) == partition {
		return id
	}
	_, rest, ok := strings.Cut(id, "/")
	if !ok {
		rest = id
	}
	return partition + "/" + rest
}

// part is one partition's share of a reservation: its debits, and where
// each stands in the whole reservation's.
type part struct {
	r   budget.Reservation
	idx []int
}

// split returns r's parts, the order they are reserved in: shards first,
// the partition of r's id (which keeps the ledger entry) last; nil when
// every debit is in the partition of r's id.
func split(r *budget.Reservation) []part {
	sharded := false
	for i := range r.Debits {
		sharded = sharded || r.Debits[i].Limit.Shard != 0
	}
	if !sharded {
		return nil // the engine gave the id the debits' one partition
	}
	groups := byPartition(r.Debits)
	if len(groups) == 1 && partitionOf(&r.Debits[0].Limit) == budget.PartitionOf(r.ID) {
		return nil
	}
	parts := make([]part, 0, len(groups))
	home := -1
	for _, g := range groups {
		p := partitionOf(&r.Debits[g[0]].Limit)
		pt := part{r: budget.Reservation{ID: partID(r.ID, p), Lease: r.Lease}, idx: g}
		for _, i := range g {
			pt.r.Debits = append(pt.r.Debits, r.Debits[i])
		}
		if pt.r.ID == r.ID {
			home = len(parts)
		}
		parts = append(parts, pt)
	}
	if home >= 0 {
		parts[home], parts[len(parts)-1] = parts[len(parts)-1], parts[home]
	}
	parts[len(parts)-1].r.Entry = r.Entry
	return parts
}

// byPartition groups the indexes of xs (debits or limits) by the partition
// they keep their state in, in order of first appearance.
func byPartition[T budget.Debit | budget.Limit](xs []T) [][]int {
	var groups [][]int
	var names []string
	for i := range xs {
		var p string
		switch x := any(&xs[i]).(type) {
		case *budget.Debit:
			p = partitionOf(&x.Limit)
		case *budget.Limit:
			p = partitionOf(x)
		}
		j := 0
		for j < len(names) && names[j] != p {
			j++
		}
		if j == len(names) {
			names = append(names, p)
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	return groups
}

// reserveParts reserves r's parts in order, all or nothing.
func (s *Store) reserveParts(ctx context.Context, r *budget.Reservation, parts []part) (budget.Result, error) {
	out := budget.Result{Decider: -1, Status: make([]budget.Status, len(r.Debits))}
	least := 2.0
	for i := range parts {
		p := &parts[i]
		res, err := s.reservePart(ctx, &p.r)
		for j := range min(len(res.Status), len(p.idx)) {
			out.Status[p.idx[j]] = res.Status[j]
		}
		if err != nil || !res.Allowed {
			if res.Decider >= 0 && res.Decider < len(p.idx) {
				out.Decider = p.idx[res.Decider]
			}
			out.RetryAfter = res.RetryAfter
			s.giveBack(ctx, parts[:i], &out)
			if res.Decider >= 0 {
				s.peekRest(ctx, parts[i+1:], &out) // a refusal reports every limit as found
			}
			return out, err
		}
		for _, sh := range res.Shadowed {
			out.Shadowed = append(out.Shadowed, p.idx[sh])
		}
		if d := res.Decider; d >= 0 && d < len(p.idx) {
			if st := res.Status[d]; st.Capacity > 0 {
				if f := float64(st.Remaining) / float64(st.Capacity); f < least {
					least, out.Decider = f, p.idx[d]
				}
			} else if out.Decider < 0 {
				out.Decider = p.idx[d]
			}
		}
	}
	ids := make([]string, len(parts))
	for i := range parts {
		ids[len(parts)-1-i] = parts[i].r.ID // the ledger entry's part first
	}
	s.mu.Lock()
	s.parts[r.ID] = ids
	s.mu.Unlock()
	out.Allowed = true
	return out, nil
}

// giveBack releases parts reserved for a request that another part
// refused, and reports their limits as they were found.
func (s *Store) giveBack(ctx context.Context, parts []part, out *budget.Result) {
	for _, p := range parts {
		if _, err := s.settlePart(ctx, p.r.ID, budget.Amounts{}, nil); err != nil {
			s.opts.Log.Warn("giving back a part of a refused reservation; its lease will end", "reservation", p.r.ID, "err", err)
		}
		for j, i := range p.idx {
			st, d := &out.Status[i], &p.r.Debits[j]
			st.Remaining = min(st.Capacity, st.Remaining+d.Amount)
			if d.Limit.Kind == budget.Ceiling {
				st.Held = max(0, st.Held-d.Amount)
			}
		}
	}
}

// peekRest fills in the limits of parts a refusal never reached.
func (s *Store) peekRest(ctx context.Context, parts []part, out *budget.Result) {
	for _, p := range parts {
		ls := make([]budget.Limit, len(p.r.Debits))
		for j := range p.r.Debits {
			ls[j] = p.r.Debits[j].Limit
		}
		st, err := s.peek(ctx, ls)
		if err != nil {
			continue // left at zero: the refusal stands on the limits that were read
		}
		for j, i := range p.idx {
			out.Status[i] = st[j]
		}
	}
}

// partsOf returns the part ids of reservation id if it was split here.
func (s *Store) partsOf(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[id]
}

// settleParts settles every part of id: the outcome is the part's with the
// ledger entry, or Spooled when any part was spooled.
func (s *Store) settleParts(ctx context.Context, id string, ids []string, actual budget.Amounts, rec json.RawMessage) (budget.Outcome, error) {
	var out budget.Outcome
	var errs []error
	for i, pid := range ids {
		r := rec
		if i > 0 {
			r = nil
		}
		o, err := s.settlePart(ctx, pid, actual, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if i == 0 || o == budget.Spooled {
			out = o
		}
	}
	if len(errs) == 0 {
		s.mu.Lock()
		delete(s.parts, id)
		s.mu.Unlock()
	}
	return out, errors.Join(errs...)
}

package memstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// TestMemoReadsAsTheMaps: random reads, writes and sweeps of rate,
// ceiling and in-flight counters — each key named by two strings of the
// same bytes at different addresses, as a request and an admin call may
// name it — read what plain maps of the same writes read, and a snapshot
// holds the same counters. A memo that kept a counter a sweep dropped
// would write to it unseen (a sweep that did not forget fails this).
func TestMemoReadsAsTheMaps(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s, err := New(Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	twice := func(names ...string) (out [][2]string) {
		for _, n := range names {
			out = append(out, [2]string{n, strings.Clone(n)})
		}
		return out
	}
	buckets := twice("org/bench", "team/load", "key/bench")
	// Periods: months, and fixed windows of 60 s that a sweep drops once
	// two windows old.
	w := now.UnixMicro() / 60e6
	periods := twice("2026-11", "2026-12", "w60000000:"+strconv.FormatInt(w-2, 10), "w60000000:"+strconv.FormatInt(w, 10))
	rates, inflight := map[string]int64{}, map[string]int64{}
	ceilings := map[ceilingKey]ceilingUse{}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(names [][2]string) (string, string) {
		n := names[rng.IntN(len(names))]
		return n[rng.IntN(2)], n[0]
	}
	nowUs := now.UnixMicro()
	for i := range 200000 {
		b, key := pick(buckets)
		v := int64(rng.IntN(5)) - 1 + nowUs*int64(rng.IntN(2)) // around 0 or around now
		s.mu.Lock()
		switch op := rng.IntN(10); op {
		case 0:
			s.state.SetRateTAT(b, v)
			rates[key] = v
		case 1:
			if got := s.state.RateTAT(b); got != rates[key] {
				t.Fatalf("op %d: RateTAT(%q) = %d, want %d", i, key, got, rates[key])
			}
		case 2:
			n := int64(rng.IntN(3))
			s.state.SetInFlight(b, n)
			inflight[key] = n
		case 3:
			if got := s.state.InFlight(b); got != inflight[key] {
				t.Fatalf("op %d: InFlight(%q) = %d, want %d", i, key, got, inflight[key])
			}
		case 4, 5:
			p, pk := pick(periods)
			s.state.SetCeilingUse(b, p, v, v+1)
			ceilings[ceilingKey{key, pk}] = ceilingUse{v, v + 1}
		case 6, 7:
			p, pk := pick(periods)
			spent, pending := s.state.CeilingUse(b, p)
			if want := ceilings[ceilingKey{key, pk}]; spent != want.Spent || pending != want.Pending {
				t.Fatalf("op %d: CeilingUse(%q, %q) = %d, %d, want %+v", i, key, pk, spent, pending, want)
			}
		}
		s.mu.Unlock()
		if rng.IntN(500) == 0 {
			if _, err := s.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			for k, tat := range rates {
				if tat <= nowUs {
					delete(rates, k)
				}
			}
			for k := range ceilings {
				if budget.WindowExpired(k.Period, now) {
					delete(ceilings, k)
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, pair := range map[string][2]map[string]int64{"rates": {values(s.state.rates), rates}, "in flight": {values(s.state.inflight), inflight}} {
		got, want := pair[0], pair[1]
		for k, v := range want {
			if v != 0 && got[k] != v {
				t.Errorf("%s: %q holds %d, want %d", name, k, got[k], v)
			}
		}
		for k, v := range got {
			if want[k] != v {
				t.Errorf("%s: %q holds %d, want %d", name, k, v, want[k])
			}
		}
	}
	if len(s.state.ceilings) != len(ceilings) {
		t.Errorf("%d ceilings kept, want %d", len(s.state.ceilings), len(ceilings))
	}
	for k, u := range s.state.ceilings {
		if *u != ceilings[k] {
			t.Errorf("ceiling %+v holds %+v, want %+v", k, *u, ceilings[k])
		}
	}
}

// TestMemoHoldsARequestsKeys: the eight keys of a request's limits, in
// strings made apart as config loading makes them, are all found after
// one use each — in practically every draw of addresses (the first memo,
// one slot of 32 per key picked by the addresses' low bits, lost a key in
// more than one request in a hundred, and fails this).
func TestMemoHoldsARequestsKeys(t *testing.T) {
	lost := 0
	const trials = 500
	for trial := range trials {
		var m memo[int64]
		var keys [][2]string
		for i := range 8 {
			keys = append(keys, [2]string{strings.Clone("org/team/bucket-" + strconv.Itoa(trial*8+i)), strings.Clone("2026-12")})
		}
		for _, k := range keys {
			m.put(k[0], k[1], new(int64))
		}
		for _, k := range keys {
			if m.get(k[0], k[1]) == nil {
				lost++
				break
			}
		}
	}
	if lost > trials/100 {
		t.Fatalf("%d of %d requests lost a key from the memo", lost, trials)
	}
}

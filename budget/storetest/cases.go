package storetest

// This file holds the cases of run-time ceilings, spend past a ceiling,
// meters, shadow limits, the window algorithms and reservations split
// across a shard.

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

func meters(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	meter := usdMonth("meter", 0)
	meter.Kind = budget.Meter
	spent := func() int64 {
		t.Helper()
		st, err := s.Peek(ctx, []budget.Limit{meter})
		if err != nil {
			t.Fatal(err)
		}
		return st[0].Spent
	}
	mustReserve(t, s, "a", usd(3*budget.Dollar), team, meter)
	mustSettle(t, s, "a", usd(2*budget.Dollar), budget.Settled)
	mustSettle(t, s, "a", usd(2*budget.Dollar), budget.AlreadySettled)
	if got := spent(); got != int64(2*budget.Dollar) {
		t.Fatalf("meter after a $2 settlement: %d", got)
	}
	// Refused by the team budget: the meter counts nothing.
	if _, _, err := reserve(t, s, "b", time.Minute, usd(9*budget.Dollar), team, meter); err == nil {
		t.Fatal("a reservation past the team budget was allowed")
	}
	// Never settled: the sweeper charges the meter the reservation.
	if _, _, err := reserve(t, s, "c", 30*time.Second, usd(1*budget.Dollar), team, meter); err != nil {
		t.Fatal(err)
	}
	c.Advance(31 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if got := spent(); got != int64(3*budget.Dollar) {
		t.Fatalf("meter after the sweep: %d, want $3", got)
	}
	// However much it counts, a meter alone never refuses.
	if _, _, err := reserve(t, s, "d", time.Minute, usd(1_000_000*budget.Dollar), meter); err != nil {
		t.Fatalf("a meter refused: %v", err)
	}
}

func temporaryCeiling(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(8*budget.Dollar), team)
	mustSettle(t, s, "a", usd(8*budget.Dollar), budget.Settled)
	// A launch week: $30 for the next hour, then the configured $10 again.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(30*budget.Dollar), c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	end := c.Now().Add(time.Hour)
	if a, u, ok, err := s.Override(ctx, team.Partition, team.Bucket); err != nil || !ok || a != int64(30*budget.Dollar) || !u.Equal(end) {
		t.Fatalf("override: %d until %s, %v %v", a, u, ok, err)
	}
	res := mustReserve(t, s, "b", usd(15*budget.Dollar), team)
	if res.Status[0].Capacity != int64(30*budget.Dollar) || res.Status[0].Remaining != int64(7*budget.Dollar) {
		t.Fatalf("under the temporary ceiling: %+v", res.Status[0])
	}
	mustSettle(t, s, "b", usd(15*budget.Dollar), budget.Settled)
	c.Advance(time.Hour - time.Microsecond)
	if st, err := s.Peek(ctx, []budget.Limit{team}); err != nil || st[0].Capacity != int64(30*budget.Dollar) {
		t.Fatalf("a µs before the expiry: %+v %v", st, err)
	}
	c.Advance(time.Microsecond)
	st, err := s.Peek(ctx, []budget.Limit{team})
	if err != nil || st[0].Capacity != int64(10*budget.Dollar) || st[0].Remaining != 0 {
		t.Fatalf("at the expiry: %+v %v", st, err)
	}
	if _, _, ok, err := s.Override(ctx, team.Partition, team.Bucket); err != nil || ok {
		t.Fatalf("a lapsed override is still reported: %v %v", ok, err)
	}
	if _, _, err := reserve(t, s, "c", time.Minute, usd(1), team); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("after the expiry, $23 spent of $10: err = %v", err)
	}
	// A permanent ceiling set afterwards drops the old expiry.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(40*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	c.Advance(24 * time.Hour)
	if st, err := s.Peek(ctx, []budget.Limit{team}); err != nil || st[0].Capacity != int64(40*budget.Dollar) {
		t.Fatalf("a permanent ceiling: %+v %v", st, err)
	}
	if a, u, ok, err := s.Override(ctx, team.Partition, team.Bucket); err != nil || !ok || a != int64(40*budget.Dollar) || !u.IsZero() {
		t.Fatalf("permanent override: %d until %s, %v %v", a, u, ok, err)
	}
	if _, _, ok, err := s.Override(ctx, team.Partition, "team:nobody"); err != nil || ok {
		t.Fatalf("a bucket without an override: %v %v", ok, err)
	}
}

// temporaryOverAnOverride: a temporary change made over another run-time
// change lapses to that one, not to the configured amount — a permanent
// $300 comes back as $300 after a one-week $500, a frozen team is frozen
// again after a one-off top-up, and temporary changes nest, the later
// lapsing to the earlier while that one lasts. A permanent change or a
// reset ends the history.
func temporaryOverAnOverride(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	peek, set := ceilingSteps(t, s, c, team)
	capacity := func(want budget.Money, when string) {
		t.Helper()
		peek(want, when)
		if a, _, ok, err := s.Override(ctx, team.Partition, team.Bucket); err != nil || !ok || a != int64(want) {
			t.Fatalf("%s: override %d %v %v, want %d", when, a, ok, err, want)
		}
	}
	set(300*budget.Dollar, 0)
	set(500*budget.Dollar, time.Hour)
	capacity(500*budget.Dollar, "during the top-up")
	c.Advance(time.Hour)
	capacity(300*budget.Dollar, "after the top-up over a permanent $300")

	set(0, 0) // frozen
	set(5*budget.Dollar, time.Hour)
	capacity(5*budget.Dollar, "during a one-off top-up of a frozen team")
	mustReserve(t, s, "a", usd(2*budget.Dollar), team)
	mustSettle(t, s, "a", usd(2*budget.Dollar), budget.Settled)
	c.Advance(time.Hour)
	capacity(0, "after the top-up of a frozen team")
	if _, _, err := reserve(t, s, "b", time.Minute, usd(1), team); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("a frozen team, its top-up lapsed: err = %v", err)
	}

	set(40*budget.Dollar, 0)
	set(50*budget.Dollar, 2*time.Hour)
	set(60*budget.Dollar, time.Hour)
	capacity(60*budget.Dollar, "the later of two temporary changes")
	c.Advance(time.Hour)
	capacity(50*budget.Dollar, "the later lapsed: the earlier, still in force")
	if _, u, _, _ := s.Override(ctx, team.Partition, team.Bucket); !u.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("the earlier change's expiry: %s", u)
	}
	c.Advance(time.Hour)
	capacity(40*budget.Dollar, "both lapsed: the permanent $40")

	set(70*budget.Dollar, time.Hour)
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, -1, time.Time{}); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Hour)
	if st, err := s.Peek(ctx, []budget.Limit{team}); err != nil || st[0].Capacity != int64(10*budget.Dollar) {
		t.Fatalf("after a reset to the configured amount: %+v %v", st, err)
	}
	set(80*budget.Dollar, time.Hour)
	set(90*budget.Dollar, 0) // permanent: nothing comes back after it
	c.Advance(2 * time.Hour)
	capacity(90*budget.Dollar, "a permanent change over a temporary one")
}

// ceilingSteps are the steps the run-time ceiling cases take on budget
// team: capacity checks what is in force, set makes a change (for d, or
// for good when d is 0).
func ceilingSteps(t *testing.T, s budget.Backend, c *Clock, team budget.Limit) (capacity func(budget.Money, string), set func(budget.Money, time.Duration)) {
	capacity = func(want budget.Money, when string) {
		t.Helper()
		st, err := s.Peek(ctx, []budget.Limit{team})
		if err != nil || st[0].Capacity != int64(want) {
			t.Fatalf("%s: capacity %+v %v, want %d", when, st, err, want)
		}
	}
	set = func(amount budget.Money, d time.Duration) {
		t.Helper()
		var until time.Time
		if d > 0 {
			until = c.Now().Add(d)
		}
		if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(amount), until); err != nil {
			t.Fatal(err)
		}
	}
	return capacity, set
}

// lapseAChange: a freeze is a change with no end over what was in force;
// Lapse ends it and what it lapsed to is back — a permanent $300, or a
// temporary top-up still lasting, or the configured amount; with nothing
// in force it says so.
func lapseAChange(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	capacity, set := ceilingSteps(t, s, c, team)
	lapse := func(want bool) {
		t.Helper()
		if ok, err := s.Lapse(ctx, team.Partition, team.Bucket); err != nil || ok != want {
			t.Fatalf("lapse: %v %v, want %v", ok, err, want)
		}
	}
	forever := 100 * 365 * 24 * time.Hour
	lapse(false) // nothing in force
	set(300*budget.Dollar, 0)
	set(0, forever) // frozen
	capacity(0, "frozen")
	lapse(true)
	capacity(300*budget.Dollar, "unfrozen: the permanent $300 back")

	set(50*budget.Dollar, time.Hour)
	set(0, forever)
	c.Advance(30 * time.Minute)
	lapse(true)
	capacity(50*budget.Dollar, "unfrozen within a top-up: the top-up back")
	c.Advance(time.Hour)
	capacity(300*budget.Dollar, "the top-up lapsed as it would have")
	lapse(true)
	capacity(10*budget.Dollar, "the permanent change ended: the configured amount")
	lapse(false)
}

// scheduleAChange: next month's ceiling set now — the amount in force
// (configured, or a permanent change) stays until then, the new one holds
// from then; not over a change that lapses.
func scheduleAChange(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	capacity, _ := ceilingSteps(t, s, c, team)
	schedule := func(amount budget.Money, in time.Duration, want bool) {
		t.Helper()
		if ok, err := s.Schedule(ctx, team.Partition, team.Bucket, int64(amount), team.Amount, c.Now().Add(in)); err != nil || ok != want {
			t.Fatalf("schedule $%d: %v %v, want %v", amount/budget.Dollar, ok, err, want)
		}
	}
	schedule(20*budget.Dollar, time.Hour, true)
	capacity(10*budget.Dollar, "before the scheduled change: the configured amount")
	c.Advance(time.Hour)
	capacity(20*budget.Dollar, "from the scheduled time")
	schedule(30*budget.Dollar, time.Hour, true)
	capacity(20*budget.Dollar, "a schedule over a permanent change keeps it until then")
	c.Advance(time.Hour)
	capacity(30*budget.Dollar, "then the next")
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(50*budget.Dollar), c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	schedule(40*budget.Dollar, 2*time.Hour, false) // a top-up is in force
	capacity(50*budget.Dollar, "a refused schedule changes nothing")
}

func runtimeCeiling(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(4*budget.Dollar), team)
	mustSettle(t, s, "a", usd(4*budget.Dollar), budget.Settled)
	// Finance freezes the team at what it has spent.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(4*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, res, err := reserve(t, s, "b", time.Minute, usd(1), team)
	if !errors.Is(err, budget.ErrExhausted) || res.Status[0].Capacity != int64(4*budget.Dollar) {
		t.Fatalf("under a lowered ceiling: err = %v, status %+v", err, res.Status)
	}
	// …then raises it above the configured amount.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, int64(20*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	res = mustReserve(t, s, "c", usd(12*budget.Dollar), team)
	if res.Status[0].Capacity != int64(20*budget.Dollar) || res.Status[0].Remaining != int64(4*budget.Dollar) {
		t.Fatalf("under a raised ceiling: %+v", res.Status[0])
	}
	// Removing the override restores the configured $10: $16 is in use.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, -1, time.Time{}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Peek(ctx, []budget.Limit{team})
	if err != nil || st[0].Capacity != int64(10*budget.Dollar) || st[0].Remaining != 0 {
		t.Fatalf("after removing the override: %+v %v", st, err)
	}
}

func shadowLimits(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	trial := usdMonth("trial", 1*budget.Dollar)
	trial.Shadow = true
	rate := tokensPerMinute("tpm", 600, 100)
	rate.Shadow = true
	// Would be refused by both shadow limits: passes, and takes nothing from them.
	_, res, err := reserve(t, s, "a", time.Minute, budget.Amounts{Cost: 2 * budget.Dollar, Tokens: 500}, team, trial, rate)
	if err != nil || !res.Allowed {
		t.Fatalf("a request only shadow limits refuse: %v", err)
	}
	if len(res.Shadowed) != 2 || res.Shadowed[0] != 1 || res.Shadowed[1] != 2 || res.Decider != 0 {
		t.Fatalf("shadowed %v, decider %d; want [1 2] and the team budget deciding", res.Shadowed, res.Decider)
	}
	if got := remaining(t, s, trial); got != int64(budget.Dollar) {
		t.Fatalf("the shadow budget was charged: remaining %d", got)
	}
	// Fits the shadow budget: taken from it like from any other.
	mustReserve(t, s, "b", budget.Amounts{Cost: budget.Dollar / 2, Tokens: 50}, team, trial, rate)
	if got := remaining(t, s, trial); got != int64(budget.Dollar/2) {
		t.Fatalf("shadow budget remaining %d, want $0.50", got)
	}
	// Settling releases exactly what each reservation took.
	mustSettle(t, s, "a", budget.Amounts{Cost: budget.Dollar, Tokens: 100}, budget.Settled)
	mustSettle(t, s, "b", budget.Amounts{Cost: budget.Dollar / 4, Tokens: 20}, budget.Settled)
	if got := remaining(t, s, trial); got != int64(budget.Dollar*3/4) {
		t.Fatalf("shadow budget after settling: %d, want $0.75", got)
	}
	if got := remaining(t, s, team); got != int64(10*budget.Dollar-budget.Dollar-budget.Dollar/4) {
		t.Fatalf("team after settling: %d", got)
	}
}

func windowLimit(bucket string, alg budget.Algorithm, n int64) budget.Limit {
	return budget.Limit{Bucket: bucket, Name: bucket, Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Requests, Amount: n, Window: time.Minute, Algorithm: alg}
}

var reqs atomic.Int64

func one(t *testing.T, s budget.Store, l budget.Limit) (bool, budget.Result) {
	t.Helper()
	id := "q" + strconv.FormatInt(reqs.Add(1), 10)
	_, res, err := reserve(t, s, id, time.Minute, budget.Amounts{Requests: 1}, l)
	switch {
	case err == nil:
		mustSettle(t, s, id, budget.Amounts{Requests: 1}, budget.Settled)
		return true, res
	case errors.Is(err, budget.ErrRateLimited):
		return false, res
	}
	t.Fatalf("reserve: %v", err)
	return false, res
}

func fixedWindowEdge(t *testing.T, s budget.Backend, c *Clock) {
	l := windowLimit("fw", budget.FixedWindow, 10)
	c.Advance(59 * time.Second) // the last second of a window
	for i := range 10 {
		if ok, _ := one(t, s, l); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	ok, res := one(t, s, l)
	if ok || res.RetryAfter != time.Second {
		t.Fatalf("11th in the window: allowed %v, retry %v (want refused until the window ends in 1s)", ok, res.RetryAfter)
	}
	c.Advance(time.Second)
	for i := range 10 {
		if ok, _ := one(t, s, l); !ok {
			t.Fatalf("request %d of the next window refused", i)
		}
	}
	// 20 requests within one second: the fixed window's documented flaw.
}

// The sliding window counter assumes the previous window's requests were
// spread evenly. Even traffic stays within one request of the limit in any
// minute; a burst at the very end of a window is the worst case, and even
// then no minute sees more than twice the limit.
func slidingWindowError(t *testing.T, s budget.Backend, c *Clock) {
	l := windowLimit("sw-even", budget.SlidingWindow, 10)
	var admitted []time.Duration
	for at := time.Duration(0); at < 5*time.Minute; at += 3 * time.Second { // 20 a minute offered
		if ok, _ := one(t, s, l); ok {
			admitted = append(admitted, at)
		}
		c.Advance(3 * time.Second)
	}
	if worst := busiestMinute(admitted); worst > 11 {
		t.Fatalf("even traffic: %d admitted in one minute, limit 10 (+1 documented error)", worst)
	}

	burst := windowLimit("sw-burst", budget.SlidingWindow, 10)
	base := c.Now()
	// Align to the last second of a window, then burst.
	c.Advance(time.Duration(60-base.Second()-1)*time.Second - time.Duration(base.Nanosecond()))
	start := c.Now()
	admitted = nil
	for i := range 10 {
		if ok, _ := one(t, s, burst); !ok {
			t.Fatalf("burst request %d refused", i)
		}
		admitted = append(admitted, 0)
	}
	c.Advance(time.Second) // the next window begins: all 10 still weigh
	ok, res := one(t, s, burst)
	if ok || res.RetryAfter != 6*time.Second {
		t.Fatalf("after the burst: allowed %v, retry %v (want 6s, when a tenth of the old window has slid out)", ok, res.RetryAfter)
	}
	for at := time.Second; at < 3*time.Minute; at += time.Second {
		if ok, _ := one(t, s, burst); ok {
			admitted = append(admitted, c.Now().Sub(start))
		}
		c.Advance(time.Second)
	}
	if worst := busiestMinute(admitted); worst > 20 {
		t.Fatalf("burst at a window edge: %d admitted in one minute, more than twice the limit", worst)
	}
}

// busiestMinute is the most admissions inside any 60-second span.
func busiestMinute(at []time.Duration) int {
	worst := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j]-at[i] < time.Minute; j++ {
			n++
		}
		worst = max(worst, n)
	}
	return worst
}

func slidingLogExact(t *testing.T, s budget.Backend, c *Clock) {
	l := windowLimit("log", budget.SlidingLog, 5)
	// Requests at 0, 10, 20, 30, 40 s: the fifth fills the log.
	for i := range 5 {
		if ok, _ := one(t, s, l); !ok {
			t.Fatalf("request %d refused", i)
		}
		c.Advance(10 * time.Second)
	}
	// At 50 s the log holds 5: refused until the first entry (0 s) leaves
	// the minute, at 60 s exactly.
	ok, res := one(t, s, l)
	if ok || res.RetryAfter != 10*time.Second {
		t.Fatalf("at 50s: allowed %v retry %v, want refused for exactly 10s", ok, res.RetryAfter)
	}
	c.Advance(10*time.Second - time.Microsecond)
	if ok, _ := one(t, s, l); ok {
		t.Fatal("allowed 1µs before the oldest entry left the window")
	}
	c.Advance(time.Microsecond)
	if ok, _ := one(t, s, l); !ok {
		t.Fatal("refused when the oldest entry had left the window")
	}
	// A refunded entry frees its room at once: reserve 1 token-weighted
	// entry and settle it at zero.
	tok := budget.Limit{Bucket: "log-tokens", Name: "log-tokens", Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Tokens, Amount: 100, Window: time.Minute, Algorithm: budget.SlidingLog}
	mustReserve(t, s, "big", budget.Amounts{Tokens: 100}, tok)
	if _, _, err := reserve(t, s, "more", time.Minute, budget.Amounts{Tokens: 1}, tok); !errors.Is(err, budget.ErrRateLimited) {
		t.Fatalf("a full token log: %v", err)
	}
	mustSettle(t, s, "big", budget.Amounts{Tokens: 30}, budget.Settled)
	if got := remaining(t, s, tok); got != 70 {
		t.Fatalf("after settling at 30 of 100: remaining %d", got)
	}
	if _, _, err := reserve(t, s, "big2", time.Minute, budget.Amounts{Tokens: 101}, tok); !errors.Is(err, budget.ErrTooLarge) {
		t.Fatalf("more than the log can ever hold: %v", err)
	}
}

// sharded reserves a partition's budget together with one shard of a busy
// rate limit, which a store may keep apart (the Redis store: another
// cluster slot): all or nothing either way, and settled, extended and
// swept as one reservation.
func sharded(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	team.Partition = "acme"
	rate := budget.Limit{Bucket: "rpm#2", Name: "rpm", Partition: "acme", Shard: 3, Scope: budget.ScopeKey,
		Kind: budget.Rate, Unit: budget.Requests, Amount: 2, Window: 30 * 24 * time.Hour} // no refill to speak of
	other := rate
	other.Bucket, other.Shard = "tpm#2", 3
	other.Unit, other.Amount = budget.Tokens, 1000
	est := budget.Amounts{Tokens: 100, Requests: 1, Cost: 4 * budget.Dollar}
	res := mustReserve(t, s, "acme/a", est, rate, team, other)
	if len(res.Status) != 3 || res.Status[0].Remaining != 1 || res.Status[1].Held != int64(4*budget.Dollar) || res.Status[2].Remaining != 900 {
		t.Fatalf("statuses after a split reservation: %+v", res.Status)
	}
	// The budget refuses: the shard's part is given back.
	est.Cost = 7 * budget.Dollar
	_, res, err := reserve(t, s, "acme/b", time.Minute, est, rate, team, other)
	if !errors.Is(err, budget.ErrHeld) || res.Decider != 1 {
		t.Fatalf("err = %v, decider %d; want ErrHeld by the budget (1)", err, res.Decider)
	}
	if res.Status[0].Remaining != 1 || res.Status[2].Remaining != 900 {
		t.Fatalf("a refused reservation reports its limits as found: %+v", res.Status)
	}
	if got := remaining(t, s, rate); got != 1 {
		t.Fatalf("the shard kept a refused request: remaining %d, want 1", got)
	}
	if _, err := s.Settle(ctx, "acme/b", usd(0)); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Fatalf("a refused split reservation must not exist; settle err = %v", err)
	}
	// The shard refuses: the budget is not held.
	est.Cost = budget.Dollar
	mustReserve(t, s, "acme/c", est, rate, team, other)
	_, res, err = reserve(t, s, "acme/d", time.Minute, est, rate, team, other)
	if !errors.Is(err, budget.ErrRateLimited) || res.Decider != 0 {
		t.Fatalf("err = %v, decider %d; want ErrRateLimited by the shard (0)", err, res.Decider)
	}
	if res.Status[1].Capacity != int64(10*budget.Dollar) || res.Status[1].Held != int64(5*budget.Dollar) {
		t.Fatalf("the budget as found by a refusal of the shard: %+v", res.Status[1])
	}
	if got := remaining(t, s, team); got != int64(5*budget.Dollar) {
		t.Fatalf("the budget held a request its shard refused: remaining %d, want $5", got)
	}
	// Settled as one: the budget charged, the shard's tokens refunded.
	mustSettle(t, s, "acme/a", budget.Amounts{Tokens: 40, Requests: 1, Cost: 3 * budget.Dollar}, budget.Settled)
	mustSettle(t, s, "acme/a", budget.Amounts{Tokens: 40, Requests: 1, Cost: 3 * budget.Dollar}, budget.AlreadySettled)
	if got := remaining(t, s, other); got != 860 {
		t.Fatalf("tokens after settling: remaining %d, want 860", got)
	}
	// Extended as one, and swept as one once it is not.
	c.Advance(50 * time.Second)
	if err := s.Extend(ctx, "acme/c", time.Minute); err != nil {
		t.Fatalf("extend a split reservation: %v", err)
	}
	c.Advance(50 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("an extended split reservation was swept: n=%d err=%v", n, err)
	}
	c.Advance(11 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n == 0 {
		t.Fatalf("sweep after expiry: n=%d err=%v", n, err)
	}
	if got, want := remaining(t, s, team), int64(10*budget.Dollar-4*budget.Dollar); got != want {
		t.Fatalf("budget after the sweep: remaining %d, want %d (3 settled + 1 swept)", got, want)
	}
	if got := remaining(t, s, other); got != 860 {
		t.Fatalf("tokens after the sweep: remaining %d, want 860 (a sweep keeps what was taken)", got)
	}
	mustSettle(t, s, "acme/c", budget.Amounts{Tokens: 10, Requests: 1, Cost: budget.Dollar / 2}, budget.Corrected)
	if got, want := remaining(t, s, team), int64(10*budget.Dollar-3*budget.Dollar-budget.Dollar/2); got != want {
		t.Fatalf("budget after a late settlement: remaining %d, want %d", got, want)
	}
}

// spendPastTheCeiling: settled spend can pass a ceiling — a settlement
// that costs more than its reservation, a late settlement correcting a
// sweep, finance setting a ceiling below what is spent — and every status
// reports it as it is: Spent past Capacity, Remaining at zero.
func spendPastTheCeiling(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	status := func(what string, st budget.Status, want budget.Status, used budget.Money) {
		t.Helper()
		if st.Capacity != want.Capacity || st.Remaining != want.Remaining || st.Held != want.Held || st.Spent != want.Spent || st.Used() != int64(used) {
			t.Fatalf("%s: capacity %d remaining %d held %d spent %d used %d; want %d %d %d %d %d",
				what, st.Capacity, st.Remaining, st.Held, st.Spent, st.Used(), want.Capacity, want.Remaining, want.Held, want.Spent, used)
		}
	}
	peekOne := func() budget.Status {
		t.Helper()
		st, err := s.Peek(ctx, []budget.Limit{team})
		if err != nil {
			t.Fatal(err)
		}
		return st[0]
	}
	d := int64(budget.Dollar)

	mustReserve(t, s, "a", usd(3*budget.Dollar), team)
	mustSettle(t, s, "a", usd(6*budget.Dollar), budget.Settled) // the upstream billed more than the bound
	if _, _, err := reserve(t, s, "b", 30*time.Second, usd(3*budget.Dollar), team); err != nil {
		t.Fatal(err)
	}
	c.Advance(31 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: n=%d err=%v, want 1", n, err)
	}
	mustSettle(t, s, "b", usd(6*budget.Dollar), budget.Corrected) // late, and more than the sweep charged
	status("after $12 settled under $10", peekOne(), budget.Status{Capacity: 10 * d, Spent: 12 * d}, 12*budget.Dollar)

	_, res, err := reserve(t, s, "c", time.Minute, usd(1), team)
	if !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("past the ceiling: err = %v, want ErrExhausted", err)
	}
	status("the refusal", res.Status[0], budget.Status{Capacity: 10 * d, Spent: 12 * d}, 12*budget.Dollar)

	// Raised, a reservation holds $5; then cut below what is spent.
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, 20*d, time.Time{}); err != nil {
		t.Fatal(err)
	}
	res = mustReserve(t, s, "d", usd(5*budget.Dollar), team)
	status("under $20", res.Status[0], budget.Status{Capacity: 20 * d, Remaining: 3 * d, Held: 5 * d, Spent: 12 * d}, 17*budget.Dollar)
	if err := s.SetCeiling(ctx, team.Partition, team.Bucket, 4*d, time.Time{}); err != nil {
		t.Fatal(err)
	}
	status("cut to $4", peekOne(), budget.Status{Capacity: 4 * d, Held: 5 * d, Spent: 12 * d}, 17*budget.Dollar)
	mustSettle(t, s, "d", usd(5*budget.Dollar), budget.Settled)
	status("$17 settled under $4", peekOne(), budget.Status{Capacity: 4 * d, Spent: 17 * d}, 17*budget.Dollar)
}

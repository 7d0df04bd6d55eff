// Package storetest is the contract every budget.Store must pass. Each store
// package runs it from its own tests:
//
//	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) budget.Store { … })
//
// The suite moves the clock; a store whose time comes from elsewhere (Redis
// TIME) must make that time follow the clock.
package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// Clock is the timeline the suite advances by hand.
type Clock = testkit.Clock

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return testkit.NewClock(t) }

// Factory returns a new, empty store on clock.
type Factory func(t *testing.T, clock *Clock) budget.Backend

// Start is where every case's clock starts: mid-month, mid-day, UTC.
var Start = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

// Run runs every contract case as a subtest.
func Run(t *testing.T, newStore Factory) {
	cases := []struct {
		desc string
		run  func(t *testing.T, s budget.Backend, c *Clock)
	}{
		{"ceiling refuses past the ceiling and names it", ceilingRefuses},
		{"all or nothing across limits", allOrNothing},
		{"settle moves pending to actual spend", settleCharges},
		{"settle is idempotent by reservation id", settleIdempotent},
		{"release returns everything", releaseReturns},
		{"expired lease is charged in full once", expiredLease},
		{"extend keeps a lease alive", extendLease},
		{"rate bucket honours burst and refill", rateBurstRefill},
		{"rate settlement refunds and goes into debt", rateDebt},
		{"request larger than a bucket is too large", tooLarge},
		{"concurrency slots are held until settled", concurrency},
		{"day and month roll over at local midnight", rollover},
		{"concurrent reservations never pass a ceiling", concurrentCeiling},
		{"peek changes nothing", peek},
		{"bad amounts are refused", badAmounts},
		{"a ceiling set at run time applies to the next reservation", runtimeCeiling},
		{"spend past the ceiling is reported as it is", spendPastTheCeiling},
		{"a temporary ceiling lapses at its expiry", temporaryCeiling},
		{"a temporary change lapses to what was in force before it", temporaryOverAnOverride},
		{"a change in force can be ended at once (an unfreeze)", lapseAChange},
		{"a change can take effect later (next month's ceiling, set now)", scheduleAChange},
		{"resetting a period zeroes its spend, not its pending", resetSpent},
		{"raising a period's spend never lowers it", raiseSpent},
		{"a meter counts settled and swept spend and never refuses", meters},
		{"shadow limits count but never refuse", shadowLimits},
		{"a fixed window lets twice its limit through at an edge", fixedWindowEdge},
		{"a sliding window keeps within its documented error", slidingWindowError},
		{"a sliding log is exact", slidingLogExact},
		{"a reservation across a partition and a shard is all or nothing", sharded},
		{"a claim is taken once until it lapses or is given back", claims},
		{"a counter counts within its window and starts again after it", counters},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			c := NewClock(Start)
			tc.run(t, newStore(t, c), c)
		})
	}
}

var ctx = context.Background()

func usdMonth(bucket string, ceiling budget.Money) budget.Limit {
	return budget.Limit{Bucket: bucket, Name: bucket, Scope: budget.ScopeTeam, Kind: budget.Ceiling,
		Unit: budget.Microdollars, Amount: int64(ceiling), Period: budget.Month}
}

func tokensPerMinute(bucket string, n, burst int64) budget.Limit {
	return budget.Limit{Bucket: bucket, Name: bucket, Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Tokens, Amount: n, Burst: burst, Window: time.Minute}
}

// reserve runs one reservation through the store as the engine would.
func reserve(t *testing.T, s budget.Store, id string, lease time.Duration, est budget.Amounts, limits ...budget.Limit) (*budget.Reservation, budget.Result, error) {
	t.Helper()
	r := &budget.Reservation{ID: id, Lease: lease}
	for _, l := range limits {
		a := est.Of(l.Unit)
		if l.Kind == budget.Concurrency {
			a = 1
		}
		r.Debits = append(r.Debits, budget.Debit{Limit: l, Amount: a})
	}
	res, err := s.Reserve(ctx, r)
	return r, res, err
}

func mustReserve(t *testing.T, s budget.Store, id string, est budget.Amounts, limits ...budget.Limit) budget.Result {
	t.Helper()
	_, res, err := reserve(t, s, id, time.Minute, est, limits...)
	if err != nil {
		t.Fatalf("reserve %s: %v", id, err)
	}
	if !res.Allowed {
		t.Fatalf("reserve %s: not allowed but no error", id)
	}
	return res
}

func mustSettle(t *testing.T, s budget.Store, id string, actual budget.Amounts, want budget.Outcome) {
	t.Helper()
	o, err := s.Settle(ctx, id, actual)
	if err != nil {
		t.Fatalf("settle %s: %v", id, err)
	}
	if o != want {
		t.Fatalf("settle %s: outcome %v, want %v", id, o, want)
	}
}

func remaining(t *testing.T, s budget.Store, l budget.Limit) int64 {
	t.Helper()
	st, err := s.Peek(ctx, []budget.Limit{l})
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	return st[0].Remaining
}

func usd(m budget.Money) budget.Amounts { return budget.Amounts{Cost: m, Requests: 1} }

func ceilingRefuses(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	res := mustReserve(t, s, "a", usd(6*budget.Dollar), team)
	if res.Status[0].Remaining != int64(4*budget.Dollar) {
		t.Fatalf("remaining after reserve = %d, want %d", res.Status[0].Remaining, 4*budget.Dollar)
	}
	// $4.000001 would fit once "a" settles: held, retry in seconds.
	_, res, err := reserve(t, s, "b", time.Minute, usd(4*budget.Dollar+1), team)
	if !errors.Is(err, budget.ErrHeld) {
		t.Fatalf("reserve past what is unheld: err = %v, want ErrHeld", err)
	}
	if res.Allowed || res.Decider != 0 || res.RetryAfter != budget.HeldRetry || res.Status[0].Held != int64(6*budget.Dollar) {
		t.Fatalf("result = %+v, want refused by limit 0, held $6, retry %v", res, budget.HeldRetry)
	}
	mustSettle(t, s, "a", usd(6*budget.Dollar), budget.Settled)
	// Now $4 is left and nothing holds it: too large, until the period ends.
	_, res, err = reserve(t, s, "b", time.Minute, usd(4*budget.Dollar+1), team)
	if !errors.Is(err, budget.ErrOverBudget) {
		t.Fatalf("reserve past the remainder: err = %v, want ErrOverBudget", err)
	}
	wantReset := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(c.Now())
	if res.RetryAfter != wantReset || res.Status[0].Remaining != int64(4*budget.Dollar) || res.Status[0].Held != 0 {
		t.Fatalf("result = %+v, want $4 remaining, retry until month end %v", res, wantReset)
	}
	mustReserve(t, s, "c", usd(4*budget.Dollar), team) // exactly to the ceiling
	if got := remaining(t, s, team); got != 0 {
		t.Fatalf("remaining at the ceiling = %d", got)
	}
	mustSettle(t, s, "c", usd(4*budget.Dollar), budget.Settled)
	// Spent at the ceiling: exhausted, until the period ends.
	_, res, err = reserve(t, s, "d", time.Minute, usd(1), team)
	if !errors.Is(err, budget.ErrExhausted) || res.RetryAfter != wantReset {
		t.Fatalf("at the ceiling: err = %v, retry %v; want ErrExhausted until %v", err, res.RetryAfter, wantReset)
	}
}

func allOrNothing(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	key := usdMonth("key", 1*budget.Dollar)
	rate := tokensPerMinute("tpm", 1000, 0)
	est := budget.Amounts{Tokens: 500, Requests: 1, Cost: 2 * budget.Dollar}
	_, res, err := reserve(t, s, "a", time.Minute, est, rate, team, key)
	if !errors.Is(err, budget.ErrOverBudget) || res.Decider != 2 {
		t.Fatalf("err = %v, decider = %d; want ErrOverBudget by the key limit (2)", err, res.Decider)
	}
	if got := remaining(t, s, team); got != int64(10*budget.Dollar) {
		t.Fatalf("team charged by a refused reservation: remaining %d", got)
	}
	if got := remaining(t, s, rate); got != 1000 {
		t.Fatalf("rate bucket charged by a refused reservation: remaining %d", got)
	}
	if _, err := s.Settle(ctx, "a", usd(0)); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Fatalf("a refused reservation must not exist; settle err = %v", err)
	}
}

func settleCharges(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(3*budget.Dollar), team)
	mustSettle(t, s, "a", usd(1_234_567), budget.Settled)
	if got, want := remaining(t, s, team), int64(10*budget.Dollar-1_234_567); got != want {
		t.Fatalf("remaining = %d, want %d", got, want)
	}
}

func settleIdempotent(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(3*budget.Dollar), team)
	mustSettle(t, s, "a", usd(2*budget.Dollar), budget.Settled)
	for range 4 {
		mustSettle(t, s, "a", usd(1*budget.Dollar), budget.AlreadySettled)
	}
	if got := remaining(t, s, team); got != int64(8*budget.Dollar) {
		t.Fatalf("replayed settles changed spend: remaining %d, want %d", got, 8*budget.Dollar)
	}
	if _, err := s.Settle(ctx, "never", usd(1)); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Fatalf("settle unknown id: err = %v", err)
	}
	if _, _, err := reserve(t, s, "a", time.Minute, usd(1), team); !errors.Is(err, budget.ErrDuplicateReservation) {
		t.Fatalf("reusing a settled id: err = %v, want ErrDuplicateReservation", err)
	}
}

func releaseReturns(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	rpm := budget.Limit{Bucket: "rpm", Name: "rpm", Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Requests, Amount: 2, Window: time.Minute}
	mustReserve(t, s, "a", usd(3*budget.Dollar), team, rpm)
	mustSettle(t, s, "a", budget.Amounts{}, budget.Settled)
	if got := remaining(t, s, team); got != int64(10*budget.Dollar) {
		t.Fatalf("release kept money: remaining %d", got)
	}
	if got := remaining(t, s, rpm); got != 2 {
		t.Fatalf("release kept the request: remaining %d", got)
	}
}

func expiredLease(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	if _, _, err := reserve(t, s, "a", 30*time.Second, usd(3*budget.Dollar), team); err != nil {
		t.Fatal(err)
	}
	c.Advance(29 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before expiry: n=%d err=%v", n, err)
	}
	c.Advance(2 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after expiry: n=%d err=%v, want 1", n, err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: n=%d err=%v, want 0", n, err)
	}
	if got := remaining(t, s, team); got != int64(7*budget.Dollar) {
		t.Fatalf("expired lease not charged in full: remaining %d", got)
	}
	// The settlement comes after all (a slow spool replay): the sweep's
	// charge becomes the actual amount, once.
	mustSettle(t, s, "a", usd(1*budget.Dollar), budget.Corrected)
	if got := remaining(t, s, team); got != int64(9*budget.Dollar) {
		t.Fatalf("a late settlement did not correct the sweep's charge: remaining %d, want $9", got)
	}
	mustSettle(t, s, "a", usd(2*budget.Dollar), budget.AlreadySettled)
	if got := remaining(t, s, team); got != int64(9*budget.Dollar) {
		t.Fatalf("a second late settlement changed the charge again: remaining %d", got)
	}
	// A sweep with no settlement after it stays charged in full.
	if _, _, err := reserve(t, s, "b", 30*time.Second, usd(3*budget.Dollar), team); err != nil {
		t.Fatal(err)
	}
	c.Advance(31 * time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep b: n=%d err=%v", n, err)
	}
	if got := remaining(t, s, team); got != int64(6*budget.Dollar) {
		t.Fatalf("b not charged in full: remaining %d", got)
	}
}

func extendLease(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	if _, _, err := reserve(t, s, "a", 30*time.Second, usd(3*budget.Dollar), team); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		c.Advance(20 * time.Second)
		if err := s.Extend(ctx, "a", 30*time.Second); err != nil {
			t.Fatalf("extend: %v", err)
		}
		if n, _ := s.Sweep(ctx); n != 0 {
			t.Fatalf("a heartbeated lease was swept")
		}
	}
	mustSettle(t, s, "a", usd(1*budget.Dollar), budget.Settled)
	if err := s.Extend(ctx, "a", time.Second); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Fatalf("extend after settle: err = %v", err)
	}
}

func rateBurstRefill(t *testing.T, s budget.Backend, c *Clock) {
	// 600 tokens per minute = 10 per second, burst 100.
	l := tokensPerMinute("tpm", 600, 100)
	tok := func(n int64) budget.Amounts { return budget.Amounts{Tokens: n, Requests: 1} }
	res := mustReserve(t, s, "a", tok(60), l)
	if res.Status[0].Remaining != 40 || res.Status[0].ResetAfter != 6*time.Second {
		t.Fatalf("status = %+v, want remaining 40, full in 6s", res.Status[0])
	}
	mustReserve(t, s, "b", tok(40), l)
	_, res, err := reserve(t, s, "c", time.Minute, tok(25), l)
	if !errors.Is(err, budget.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if res.RetryAfter != 2500*time.Millisecond {
		t.Fatalf("retry after = %v, want 2.5s (25 tokens at 10/s)", res.RetryAfter)
	}
	c.Advance(2499 * time.Millisecond)
	if _, _, err := reserve(t, s, "d", time.Minute, tok(25), l); !errors.Is(err, budget.ErrRateLimited) {
		t.Fatalf("1 ms early: err = %v, want ErrRateLimited", err)
	}
	c.Advance(time.Millisecond)
	mustReserve(t, s, "e", tok(25), l)
	c.Advance(time.Hour)
	if got := remaining(t, s, l); got != 100 {
		t.Fatalf("after an hour remaining = %d, want the burst 100", got)
	}
}

func rateDebt(t *testing.T, s budget.Backend, c *Clock) {
	l := tokensPerMinute("tpm", 600, 100)
	mustReserve(t, s, "a", budget.Amounts{Tokens: 50}, l)
	mustSettle(t, s, "a", budget.Amounts{Tokens: 20}, budget.Settled)
	if got := remaining(t, s, l); got != 80 {
		t.Fatalf("after refund remaining = %d, want 80", got)
	}
	mustReserve(t, s, "b", budget.Amounts{Tokens: 80}, l)
	mustSettle(t, s, "b", budget.Amounts{Tokens: 130}, budget.Settled) // upstream overran
	st, _ := s.Peek(ctx, []budget.Limit{l})
	if st[0].Remaining != 0 || st[0].ResetAfter != 15*time.Second {
		t.Fatalf("in debt: %+v, want remaining 0, full in 15s (150 tokens at 10/s)", st[0])
	}
	_, res, err := reserve(t, s, "c", time.Minute, budget.Amounts{Tokens: 10}, l)
	if !errors.Is(err, budget.ErrRateLimited) || res.RetryAfter != 6*time.Second {
		t.Fatalf("err = %v retry = %v; want rate limited for 6s (debt of 50 + 10 at 10/s)", err, res.RetryAfter)
	}
}

func tooLarge(t *testing.T, s budget.Backend, c *Clock) {
	l := tokensPerMinute("tpm", 600, 100)
	if _, _, err := reserve(t, s, "a", time.Minute, budget.Amounts{Tokens: 101}, l); !errors.Is(err, budget.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	team := usdMonth("team", 10*budget.Dollar)
	if _, _, err := reserve(t, s, "b", time.Minute, budget.Amounts{Tokens: 101, Cost: 11 * budget.Dollar}, team, l); !errors.Is(err, budget.ErrTooLarge) {
		t.Fatalf("too large beside an exhausted budget: err = %v, want ErrTooLarge to decide", err)
	}
}

func concurrency(t *testing.T, s budget.Backend, c *Clock) {
	l := budget.Limit{Bucket: "conc", Name: "conc", Scope: budget.ScopeKey, Kind: budget.Concurrency,
		Unit: budget.Requests, Amount: 2}
	mustReserve(t, s, "a", usd(1), l)
	mustReserve(t, s, "b", usd(1), l)
	if _, _, err := reserve(t, s, "c", time.Minute, usd(1), l); !errors.Is(err, budget.ErrConcurrency) {
		t.Fatalf("third in flight: err = %v, want ErrConcurrency", err)
	}
	mustSettle(t, s, "a", usd(1), budget.Settled)
	mustReserve(t, s, "d", usd(1), l)
	if got := remaining(t, s, l); got != 0 {
		t.Fatalf("remaining = %d, want 0", got)
	}
}

func rollover(t *testing.T, s budget.Backend, c *Clock) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-11-30 23:59:00 in Tokyo is 14:59 UTC: the last minute of the month there.
	c.Advance(time.Date(2026, 11, 30, 14, 59, 0, 0, time.UTC).Sub(c.Now()))
	month := budget.Limit{Bucket: "m", Name: "m", Scope: budget.ScopeTeam, Kind: budget.Ceiling,
		Unit: budget.Microdollars, Amount: 100, Period: budget.Month, Location: tokyo}
	day := budget.Limit{Bucket: "d", Name: "d", Scope: budget.ScopeTeam, Kind: budget.Ceiling,
		Unit: budget.Microdollars, Amount: 100, Period: budget.Day, Location: tokyo}
	mustReserve(t, s, "a", usd(100), month, day)
	_, res, err := reserve(t, s, "b", time.Minute, usd(101), month, day)
	if !errors.Is(err, budget.ErrOverBudget) || res.RetryAfter != time.Minute {
		t.Fatalf("err = %v retry = %v; want exhausted until Tokyo midnight (1m)", err, res.RetryAfter)
	}
	c.Advance(time.Minute)
	mustReserve(t, s, "c", usd(100), month, day) // December 1st in Tokyo: both periods are new
	// The November reservation settles in December and is charged to November.
	mustSettle(t, s, "a", usd(40), budget.Settled)
	if got := remaining(t, s, month); got != 0 {
		t.Fatalf("December remaining = %d; a November settlement leaked into it", got)
	}
}

func concurrentCeiling(t *testing.T, s budget.Backend, c *Clock) {
	const price = 7_777 // µ$ per request
	team := usdMonth("team", 100*price+price-1)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			id := "r" + strconv.Itoa(i)
			_, _, err := reserve(t, s, id, time.Minute, usd(price), team)
			switch {
			case err == nil:
				admitted.Add(1)
				if _, err := s.Settle(ctx, id, usd(price)); err != nil {
					t.Errorf("settle: %v", err)
				}
			case !budget.IsBudgetRefusal(err):
				t.Errorf("reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 100 {
		t.Fatalf("admitted %d, want exactly 100", admitted.Load())
	}
	if got := remaining(t, s, team); got != price-1 {
		t.Fatalf("remaining = %d, want %d", got, price-1)
	}
}

func peek(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	for range 3 {
		if got := remaining(t, s, team); got != int64(10*budget.Dollar) {
			t.Fatalf("peek = %d", got)
		}
	}
	mustReserve(t, s, "a", usd(10*budget.Dollar), team)
}

func badAmounts(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(1), team)
	if _, err := s.Settle(ctx, "a", budget.Amounts{Cost: -5}); err == nil {
		t.Fatal("a negative settlement was accepted")
	}
	mustSettle(t, s, "a", usd(1), budget.Settled)
}

func resetSpent(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(4*budget.Dollar), team)
	mustSettle(t, s, "a", usd(4*budget.Dollar), budget.Settled)
	mustReserve(t, s, "b", usd(5*budget.Dollar), team) // in flight across the reset
	period, was, err := s.ResetSpent(ctx, team)
	if err != nil || was != int64(4*budget.Dollar) || period != budget.PeriodID(team.Period, c.Now(), team.Location) {
		t.Fatalf("reset: period %q, was %d, %v", period, was, err)
	}
	if st, err := s.Peek(ctx, []budget.Limit{team}); err != nil || st[0].Remaining != int64(5*budget.Dollar) {
		t.Fatalf("after the reset, $5 still pending: %+v %v", st, err)
	}
	mustSettle(t, s, "b", usd(2*budget.Dollar), budget.Settled)
	if st, err := s.Peek(ctx, []budget.Limit{team}); err != nil || st[0].Remaining != int64(8*budget.Dollar) {
		t.Fatalf("the in-flight request settled at $2 after the reset: %+v %v", st, err)
	}
	// A period nothing was charged in resets to nothing, and creates no counter.
	other := usdMonth("other", 10*budget.Dollar)
	if _, was, err := s.ResetSpent(ctx, other); err != nil || was != 0 {
		t.Fatalf("reset of an untouched budget: %d %v", was, err)
	}
}

func raiseSpent(t *testing.T, s budget.Backend, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(4*budget.Dollar), team)
	mustSettle(t, s, "a", usd(4*budget.Dollar), budget.Settled)
	mustReserve(t, s, "b", usd(1*budget.Dollar), team) // pending stays
	if was, err := s.RaiseSpent(ctx, team, int64(3*budget.Dollar)); err != nil || was != int64(4*budget.Dollar) {
		t.Fatalf("raise to less: was %d, %v", was, err)
	}
	if st, _ := s.Peek(ctx, []budget.Limit{team}); st[0].Remaining != int64(5*budget.Dollar) {
		t.Fatalf("a raise to less changed the spend: %+v", st[0])
	}
	if was, err := s.RaiseSpent(ctx, team, int64(7*budget.Dollar)); err != nil || was != int64(4*budget.Dollar) {
		t.Fatalf("raise: was %d, %v", was, err)
	}
	if st, _ := s.Peek(ctx, []budget.Limit{team}); st[0].Remaining != int64(2*budget.Dollar) {
		t.Fatalf("after raising to $7 with $1 pending: %+v", st[0])
	}
	if _, err := s.RaiseSpent(ctx, team, -1); err == nil {
		t.Fatal("a negative spend was accepted")
	}
	// The next month starts from nothing.
	c.Advance(32 * 24 * time.Hour)
	if st, _ := s.Peek(ctx, []budget.Limit{team}); st[0].Remaining != int64(10*budget.Dollar) {
		t.Fatalf("next month: %+v", st[0])
	}
}

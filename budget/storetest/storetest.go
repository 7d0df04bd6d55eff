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
)

// Clock is a fixed timeline the suite advances by hand.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Factory returns a new, empty store on clock.
type Factory func(t *testing.T, clock *Clock) budget.Store

// Start is where every case's clock starts: mid-month, mid-day, UTC.
var Start = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

// Run runs every contract case as a subtest.
func Run(t *testing.T, newStore Factory) {
	cases := []struct {
		desc string
		run  func(t *testing.T, s budget.Store, c *Clock)
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
		{"a temporary ceiling lapses at its expiry", temporaryCeiling},
		{"resetting a period zeroes its spend, not its pending", resetSpent},
		{"raising a period's spend never lowers it", raiseSpent},
		{"a meter counts settled and swept spend and never refuses", meters},
		{"shadow limits count but never refuse", shadowLimits},
		{"a fixed window lets twice its limit through at an edge", fixedWindowEdge},
		{"a sliding window keeps within its documented error", slidingWindowError},
		{"a sliding log is exact", slidingLogExact},
		{"a reservation across a partition and a shard is all or nothing", sharded},
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

func ceilingRefuses(t *testing.T, s budget.Store, c *Clock) {
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

func allOrNothing(t *testing.T, s budget.Store, c *Clock) {
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

func settleCharges(t *testing.T, s budget.Store, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(3*budget.Dollar), team)
	mustSettle(t, s, "a", usd(1_234_567), budget.Settled)
	if got, want := remaining(t, s, team), int64(10*budget.Dollar-1_234_567); got != want {
		t.Fatalf("remaining = %d, want %d", got, want)
	}
}

func settleIdempotent(t *testing.T, s budget.Store, c *Clock) {
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

func releaseReturns(t *testing.T, s budget.Store, c *Clock) {
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

func expiredLease(t *testing.T, s budget.Store, c *Clock) {
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

func extendLease(t *testing.T, s budget.Store, c *Clock) {
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

func rateBurstRefill(t *testing.T, s budget.Store, c *Clock) {
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

func rateDebt(t *testing.T, s budget.Store, c *Clock) {
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

func tooLarge(t *testing.T, s budget.Store, c *Clock) {
	l := tokensPerMinute("tpm", 600, 100)
	if _, _, err := reserve(t, s, "a", time.Minute, budget.Amounts{Tokens: 101}, l); !errors.Is(err, budget.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	team := usdMonth("team", 10*budget.Dollar)
	if _, _, err := reserve(t, s, "b", time.Minute, budget.Amounts{Tokens: 101, Cost: 11 * budget.Dollar}, team, l); !errors.Is(err, budget.ErrTooLarge) {
		t.Fatalf("too large beside an exhausted budget: err = %v, want ErrTooLarge to decide", err)
	}
}

func concurrency(t *testing.T, s budget.Store, c *Clock) {
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

func rollover(t *testing.T, s budget.Store, c *Clock) {
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

func concurrentCeiling(t *testing.T, s budget.Store, c *Clock) {
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

func peek(t *testing.T, s budget.Store, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	for range 3 {
		if got := remaining(t, s, team); got != int64(10*budget.Dollar) {
			t.Fatalf("peek = %d", got)
		}
	}
	mustReserve(t, s, "a", usd(10*budget.Dollar), team)
}

func badAmounts(t *testing.T, s budget.Store, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	mustReserve(t, s, "a", usd(1), team)
	if _, err := s.Settle(ctx, "a", budget.Amounts{Cost: -5}); err == nil {
		t.Fatal("a negative settlement was accepted")
	}
	mustSettle(t, s, "a", usd(1), budget.Settled)
}

func resetSpent(t *testing.T, s budget.Store, c *Clock) {
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

func raiseSpent(t *testing.T, s budget.Store, c *Clock) {
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

func meters(t *testing.T, s budget.Store, c *Clock) {
	team := usdMonth("team", 10*budget.Dollar)
	meter := usdMonth("meter", 1<<50)
	meter.Shadow, meter.Meter = true, true
	spent := func() int64 {
		t.Helper()
		st, err := s.Peek(ctx, []budget.Limit{meter})
		if err != nil {
			t.Fatal(err)
		}
		return st[0].Capacity - st[0].Remaining
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

func temporaryCeiling(t *testing.T, s budget.Store, c *Clock) {
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

func runtimeCeiling(t *testing.T, s budget.Store, c *Clock) {
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

func shadowLimits(t *testing.T, s budget.Store, c *Clock) {
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

func fixedWindowEdge(t *testing.T, s budget.Store, c *Clock) {
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
func slidingWindowError(t *testing.T, s budget.Store, c *Clock) {
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

func slidingLogExact(t *testing.T, s budget.Store, c *Clock) {
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
func sharded(t *testing.T, s budget.Store, c *Clock) {
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

package redisstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/budget/storetest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

func leased(rdb redis.UniversalClient, now func() time.Time) *redisstore.Store {
	return redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, SettleTimeout: 5 * time.Second, Now: now,
		Partitions: []string{"acme"}, Leases: &redisstore.LeaseOptions{}})
}

// With leases, requests are admitted and settled without a round trip:
// after the first lease call, a hundred requests cost Redis a handful of
// calls, and one flush charges exactly what they spent.
func TestLeasedRequestsNeedNoRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := leased(rdb, nil)
	e := budget.NewEngine(s, time.Minute)
	limits := requestLimits()
	est, actual := budget.Amounts{Tokens: 100, Requests: 1, Cost: 1000}, budget.Amounts{Tokens: 60, Requests: 1, Cost: 600}
	for range 10 { // the slices grow with demand
		r, _, err := e.Reserve(bg, limits, est)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(bg, r, actual); err != nil {
			t.Fatal(err)
		}
		if err := s.FlushLeases(bg); err != nil {
			t.Fatal(err)
		}
	}
	hook := &countingHook{calls: map[string]int{}}
	rdb.AddHook(hook)
	const n = 100
	for range n {
		r, res, err := e.Reserve(bg, limits, est)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || len(res.Status) != len(limits) {
			t.Fatalf("result %+v", res)
		}
		if o, err := e.Settle(bg, r, actual); err != nil || o != budget.Settled {
			t.Fatalf("settle: %v %v", o, err)
		}
	}
	t.Logf("%d requests, script calls %v", n, hook.calls)
	if calls := hook.calls["evalsha"]; calls > n/10 {
		t.Fatalf("%d requests took %d script calls, want at most %d", n, calls, n/10)
	}
	if err := s.ReturnLeases(bg); err != nil {
		t.Fatal(err)
	}
	spent, pending := spentOf(t, rdb, "tg", budget.Limit{Bucket: limits[0].Bucket, Partition: "acme", Period: budget.Month})
	if want := int64(n+10) * 600; spent != want || pending != 0 {
		t.Fatalf("after returning the leases: spent %d pending %d, want %d and 0", spent, pending, want)
	}
	if n := rdb.Exists(bg, "tg:{acme}:n:team:acme/ml:in-flight").Val(); n != 0 {
		t.Fatal("concurrency slots still held after every request settled and the leases went back")
	}
}

// An instance that dies holding slices: once its lessee record expires,
// another instance's sweep charges the slices in full (a ceiling's) or frees
// them (concurrency), once.
func TestADeadInstancesSlicesAreChargedInFull(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := storetest.NewClock(time.Now())
	dead, alive := leased(rdb, c.Now), leased(rdb, c.Now)
	team := teamCeiling("acme", 100*budget.Dollar)
	slots := budget.Limit{Bucket: "team:acme/t:in-flight", Name: "in-flight", Partition: "acme", Scope: budget.ScopeTeam,
		Kind: budget.Concurrency, Unit: budget.Requests, Amount: 10}
	e := budget.NewEngine(dead, time.Minute)
	r, _, err := e.Reserve(bg, []budget.Limit{team, slots}, budget.Amounts{Cost: budget.Dollar, Requests: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Settle(bg, r, budget.Amounts{Cost: 300_000, Requests: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Reserve(bg, []budget.Limit{team, slots}, budget.Amounts{Cost: budget.Dollar, Requests: 1}); err != nil {
		t.Fatal(err) // in flight when it dies
	}
	_, held := spentOf(t, rdb, "tg", team)
	if held < int64(budget.Dollar) {
		t.Fatalf("the slice holds %d, less than the request in flight", held)
	}
	// dead stops here: no flush, no renewal.
	c.Advance(5 * time.Second)
	if _, err := alive.Sweep(bg); err != nil {
		t.Fatal(err)
	}
	if _, pending := spentOf(t, rdb, "tg", team); pending != held {
		t.Fatalf("a live lessee's slice was touched: pending %d, was %d", pending, held)
	}
	c.Advance(6 * time.Second) // past the 10 s lessee lifetime
	for range 2 {
		if _, err := alive.Sweep(bg); err != nil {
			t.Fatal(err)
		}
	}
	spent, pending := spentOf(t, rdb, "tg", team)
	if spent != held || pending != 0 {
		t.Fatalf("after the sweep: spent %d pending %d, want the whole slice %d charged once", spent, pending, held)
	}
	if n, _ := rdb.Get(bg, "tg:{acme}:n:team:acme/t:in-flight").Int64(); n != 0 {
		t.Fatalf("%d slots still held by the dead instance", n)
	}
}

// Near the ceiling nothing is stranded: a slice an idle instance holds goes
// back at its next flush, and another instance can then reserve the whole
// remainder.
func TestAnIdleInstanceGivesItsSliceBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	a, b := leased(rdb, nil), leased(rdb, nil)
	team := teamCeiling("acme", 10*budget.Dollar)
	ea, eb := budget.NewEngine(a, time.Minute), budget.NewEngine(b, time.Minute)
	r, _, err := ea.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ea.Settle(bg, r, budget.Amounts{Cost: budget.Dollar}); err != nil {
		t.Fatal(err)
	}
	if err := a.FlushLeases(bg); err != nil { // a was busy: it keeps a slice
		t.Fatal(err)
	}
	if _, pending := spentOf(t, rdb, "tg", team); pending == 0 {
		t.Fatal("a holds no slice: the test proves nothing")
	}
	if err := a.FlushLeases(bg); err != nil { // a was idle: it gives it back
		t.Fatal(err)
	}
	if spent, pending := spentOf(t, rdb, "tg", team); spent != int64(budget.Dollar) || pending != 0 {
		t.Fatalf("after an idle flush: spent %d pending %d", spent, pending)
	}
	if _, _, err := eb.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 9 * budget.Dollar}); err != nil {
		t.Fatalf("the whole remainder: %v", err)
	}
	if _, _, err := eb.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 1}); !errors.Is(err, budget.ErrHeld) {
		t.Fatalf("past the ceiling: %v, want ErrHeld", err)
	}
}

// pairs reserves and settles n requests of cost each through e, returning
// what they spent.
func pairs(t *testing.T, e *budget.Engine, l budget.Limit, n int, cost budget.Money) int64 {
	t.Helper()
	var spent int64
	for range n {
		r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 2 * cost})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(bg, r, budget.Amounts{Cost: cost}); err != nil {
			t.Fatal(err)
		}
		spent += int64(cost)
	}
	return spent
}

// returnLeases gives s's slices back once Redis answers again (its breaker
// may still be open for a moment), up to 5 s.
func returnLeases(t *testing.T, s *redisstore.Store) {
	t.Helper()
	var err error
	if !testkit.WaitFor(5*time.Second, func() bool { err = s.ReturnLeases(bg); return err == nil }) {
		t.Fatal(err)
	}
}

// A frozen Redis (a stall: SIGSTOP keeps its data): requests go on being
// admitted against the slices this instance holds — they are pending in
// Redis, whatever the stall — until the slices are older than TTL/2; then
// each is renewed first, which fails, and requests fail closed. What was
// spent meanwhile is charged once when Redis answers again. Before, the
// first flush that failed stopped local admission, and a stall over a
// second shed every tenant.
func TestLeasedStoreAdmitsAgainstItsSlicesThroughAStall(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := redisstore.New(rdb, redisstore.Options{Timeout: 200 * time.Millisecond, SettleTimeout: 200 * time.Millisecond,
		Partitions: []string{"acme"}, Leases: &redisstore.LeaseOptions{Flush: 100 * time.Millisecond, TTL: time.Second}})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go s.RunLeases(ctx)
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	// Steady traffic, about two requests a flush (an instance idle for a
	// flush gives its slices back). A slice then holds about eight of
	// them, 400 ms of traffic: with the first flush failing after its
	// 200 ms timeout, some are left.
	var spent, afterFailure, refused atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			failed := func() bool { st, _ := s.LeaseStats(); return st.Failures > 0 }()
			r, _, err := e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 2_000})
			if errors.Is(err, budget.ErrStoreUnavailable) {
				refused.Add(1)
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := e.Settle(bg, r, budget.Amounts{Cost: 1_000}); err != nil {
				t.Error(err)
				return
			}
			spent.Add(1_000)
			if failed {
				afterFailure.Add(1)
			}
			time.Sleep(50 * time.Millisecond) // a client's steady pace: about 20 requests a second
		}
	}()
	if !testkit.WaitFor(10*time.Second, func() bool { return spent.Load() >= 10_000 }) {
		t.Fatal("no traffic")
	}
	srv.Signal(syscall.SIGSTOP)
	if !testkit.WaitFor(5*time.Second, func() bool { return afterFailure.Load() >= 3 }) {
		t.Fatalf("%d requests admitted after the first flush failed, want them admitted against the slices", afterFailure.Load())
	}
	if !testkit.WaitFor(10*time.Second, func() bool { return refused.Load() > 0 }) {
		t.Fatal("still admitting locally past TTL/2 of a stall")
	}
	close(stop)
	<-done
	want := spent.Load()
	srv.Signal(syscall.SIGCONT)
	cancel()
	returnLeases(t, s)
	if spent, pending := spentOf(t, rdb, "tg", team); spent != want || pending != 0 {
		t.Fatalf("spent %d pending %d, want %d once and nothing pending", spent, pending, want)
	}
}

// A Redis that is gone (refused connections: it may come back without the
// slices) stops local admission at the first flush that fails.
func TestLeasedStoreFailsClosedWhenRedisIsGone(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := redisstore.New(rdb, redisstore.Options{Timeout: 200 * time.Millisecond, SettleTimeout: 200 * time.Millisecond,
		Partitions: []string{"acme"}, Leases: &redisstore.LeaseOptions{Flush: 20 * time.Millisecond}})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go s.RunLeases(ctx)
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	pairs(t, e, team, 50, 1_000)
	srv.Kill()
	if !testkit.WaitFor(5*time.Second, func() bool { st, _ := s.LeaseStats(); return st.Failures > 0 }) {
		t.Fatal("no flush failed with Redis gone")
	}
	if _, _, err := e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 1}); !errors.Is(err, budget.ErrStoreUnavailable) {
		t.Fatalf("a reservation with Redis gone: %v, want the store unavailable", err)
	}
}

// Redis restarted without its data while a leased store held unflushed
// spend: its next flush finds its write mark gone, so the org is refused
// until it is rebuilt from the ledger (here: the flushed spend raised
// back, as the gateway's reseed does); then the store charges what it had
// not flushed, once.
func TestLeasedSpendSurvivesRedisLosingItsData(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	lost := make(chan string, 1)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Partitions: []string{"acme"},
		Leases: &redisstore.LeaseOptions{Flush: time.Hour}, OnLost: func(p string) { lost <- p }})
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	flushed := pairs(t, e, team, 20, 1_000)
	if err := s.FlushLeases(bg); err != nil {
		t.Fatal(err)
	}
	want := flushed + pairs(t, e, team, 10, 1_000) // not flushed yet
	srv.Kill()
	srv.Restart() // no persistence: empty
	if err := s.FlushLeases(bg); !errors.Is(err, redisstore.ErrPartitionLost) {
		t.Fatalf("flush after Redis lost its data: %v, want the org refused", err)
	}
	if p := <-lost; p != "acme" {
		t.Fatalf("OnLost(%q)", p)
	}
	if _, _, err := e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 1}); !errors.Is(err, budget.ErrStoreUnavailable) {
		t.Fatalf("a reservation before the rebuild: %v, want the store unavailable", err)
	}
	if _, err := s.RaiseSpent(bg, team, flushed); err != nil { // the ledger's reseed
		t.Fatal(err)
	}
	if err := s.Rebuilt(bg, "acme"); err != nil {
		t.Fatal(err)
	}
	returnLeases(t, s)
	if spent, _ := spentOf(t, rdb, "tg", team); spent != want {
		t.Fatalf("spent %d after Redis lost its data, want all %d this instance spent", spent, want)
	}
}

// A leased store that sat idle longer than its slices are trusted (no
// partition yet, so nothing to flush) still leases when requests come.
func TestALeasedStoreIdleAtStartStillLeases(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := storetest.NewClock(time.Now())
	s := leased(rdb, c.Now)
	c.Advance(time.Minute)
	hook := &countingHook{calls: map[string]int{}}
	rdb.AddHook(hook)
	pairs(t, budget.NewEngine(s, time.Minute), teamCeiling("acme", 100*budget.Dollar), 50, 1_000)
	if calls := hook.calls["evalsha"]; calls > 5 {
		t.Fatalf("50 requests took %d script calls: the idle store never leased", calls)
	}
}

// A request with a limit that stays exact (a window) and leasable ones: the
// leasable part is admitted here, the window in Redis, all or nothing —
// when the window refuses, the local part is given back, and the result
// names the window.
func TestAHybridRequestIsAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := leased(rdb, nil)
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 10*budget.Dollar)
	window := budget.Limit{Bucket: "key:acme/k:rpm", Name: "rpm", Partition: "acme", Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Requests, Amount: 2, Window: time.Hour, Algorithm: budget.FixedWindow}
	limits := []budget.Limit{team, window}
	var rs []*budget.Reservation
	for range 2 {
		r, res, err := e.Reserve(bg, limits, budget.Amounts{Cost: budget.Dollar, Requests: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || len(res.Status) != 2 || res.Status[0].Capacity != int64(10*budget.Dollar) || res.Status[1].Capacity != 2 {
			t.Fatalf("result %+v", res)
		}
		rs = append(rs, r)
	}
	_, res, err := e.Reserve(bg, limits, budget.Amounts{Cost: budget.Dollar, Requests: 1})
	if !errors.Is(err, budget.ErrRateLimited) || res.Decider != 1 {
		t.Fatalf("third request: %v, decider %d; want the window's refusal", err, res.Decider)
	}
	for _, r := range rs {
		if o, err := e.Settle(bg, r, budget.Amounts{Cost: 400_000, Requests: 1}); err != nil || o != budget.Settled {
			t.Fatalf("settle: %v %v", o, err)
		}
	}
	if err := s.ReturnLeases(bg); err != nil {
		t.Fatal(err)
	}
	if spent, pending := spentOf(t, rdb, "tg", team); spent != 800_000 || pending != 0 {
		t.Fatalf("spent %d pending %d, want the two settled requests' 800000 and nothing held for the refused one", spent, pending)
	}
	if n := rdb.Exists(bg, "tg:{acme}:open").Val(); n != 0 {
		t.Fatal("the window's reservations were not settled in Redis")
	}
}

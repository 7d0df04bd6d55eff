package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

var bg = context.Background()

func teamCeiling(p string, ceiling budget.Money) budget.Limit {
	return budget.Limit{Bucket: "team:" + p + "/t:usd-month", Name: "usd-month", Partition: p, Scope: budget.ScopeTeam,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(ceiling), Period: budget.Month}
}

func spentOf(t *testing.T, rdb redis.Cmdable, prefix string, l budget.Limit) (spent, pending int64) {
	t.Helper()
	key := prefix + ":{" + l.Partition + "}:c:" + l.Bucket + ":" + budget.PeriodID(l.Period, time.Now(), nil)
	v, err := rdb.HMGet(bg, key, "spent", "pending").Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if s, ok := x.(string); ok {
			n, _ := strconv.ParseInt(s, 10, 64)
			if i == 0 {
				spent = n
			} else {
				pending = n
			}
		}
	}
	return spent, pending
}

// replayAll replays the spool until it is empty (the store's breaker may
// still be open for a moment after Redis returns), up to 5 s.
func replayAll(t *testing.T, sp *redisstore.Spool, s *redisstore.Store) int {
	t.Helper()
	total := 0
	testkit.WaitFor(5*time.Second, func() bool {
		if sp.Len() == 0 {
			return true
		}
		n, _ := sp.Replay(bg, s)
		total += n
		return false
	})
	return total
}

// On Redis's own clock: reserve, settle and peek agree.
func TestRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(srv.Client(), redisstore.Options{})
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 10*budget.Dollar)
	r, res, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 3 * budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	if reset := res.Status[0].ResetAfter; reset <= 0 || reset > 31*24*time.Hour {
		t.Fatalf("reset after %v", reset)
	}
	if _, err := e.Settle(bg, r, budget.Amounts{Cost: 1_234_567}); err != nil {
		t.Fatal(err)
	}
	st, err := e.Peek(bg, []budget.Limit{l})
	if err != nil || st[0].Remaining != int64(10*budget.Dollar)-1_234_567 {
		t.Fatalf("peek %+v %v", st, err)
	}
}

func TestFailsClosedWhenRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	sp, _ := redisstore.OpenSpool("")
	s := redisstore.New(srv.Client(), redisstore.Options{Timeout: 100 * time.Millisecond, Spool: sp})
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 10*budget.Dollar)
	if _, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 1}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	spooledBeforeOpen := 0
	for i := range 7 {
		if i == 5 {
			spooledBeforeOpen = sp.Len()
		}
		start := time.Now()
		_, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 1})
		if !errors.Is(err, budget.ErrStoreUnavailable) {
			t.Fatalf("reserve with Redis down: %v, want ErrStoreUnavailable", err)
		}
		// Not a speed check: a refusal must not wait on retries and
		// reconnects far past the configured timeout.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("refusing took %v", d)
		}
		// After five failures the breaker answers without trying Redis.
		if open := errors.Is(err, gobreaker.ErrOpenState); open != (i >= 5) {
			t.Fatalf("call %d: breaker open = %v (%v)", i, open, err)
		}
	}
	// A call that timed out may have reached Redis, so its release is
	// spooled (and finds nothing if it did not); once the breaker is open
	// no call is sent and nothing more is spooled.
	if sp.Len() != spooledBeforeOpen || sp.Len() > 5 {
		t.Fatalf("spooled %d releases, %d of them after the breaker opened", sp.Len(), sp.Len()-spooledBeforeOpen)
	}
}

// A frozen Redis (SIGSTOP: a partition, not a crash) makes settlements
// spool; when it answers again they are replayed, each charged once.
func TestSpoolReplaysAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	path := filepath.Join(t.TempDir(), "spool.jsonl")
	sp, err := redisstore.OpenSpool(path)
	if err != nil {
		t.Fatal(err)
	}
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Spool: sp, SettleTimeout: 200 * time.Millisecond})
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 100*budget.Dollar)
	var rs []*budget.Reservation
	for range 20 {
		r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: budget.Dollar})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	srv.Signal(syscall.SIGSTOP)
	var want int64
	for i, r := range rs {
		cost := budget.Money(100_000 + i)
		want += int64(cost)
		o, err := e.Settle(bg, r, budget.Amounts{Cost: cost})
		if err != nil || o != budget.Spooled {
			t.Fatalf("settle during the outage: %v %v, want spooled", o, err)
		}
	}
	if sp.Len() != 20 {
		t.Fatalf("spool holds %d", sp.Len())
	}
	// A gateway restarted now would find them in the file.
	if again, err := redisstore.OpenSpool(path); err != nil || again.Len() != 20 {
		t.Fatalf("reopened spool: %v, %d entries", err, again.Len())
	} else {
		again.Close()
	}
	srv.Signal(syscall.SIGCONT)
	if n := replayAll(t, sp, s); n != 20 {
		t.Fatalf("replayed %d", n)
	}
	if n, _ := sp.Replay(bg, s); n != 0 {
		t.Fatalf("second replay applied %d", n)
	}
	if spent, pending := spentOf(t, rdb, "tg", l); spent != want || pending != 0 {
		t.Fatalf("after replay spent %d pending %d, want %d and 0", spent, pending, want)
	}
	// Settling again (the gateway retrying) changes nothing.
	for _, r := range rs[:5] {
		if o, err := e.Settle(bg, r, budget.Amounts{Cost: budget.Dollar}); err != nil || o != budget.AlreadySettled {
			t.Fatalf("re-settle: %v %v", o, err)
		}
	}
	if spent, _ := spentOf(t, rdb, "tg", l); spent != want {
		t.Fatalf("re-settles changed spend to %d", spent)
	}
}

// Redis restarted without its data while settlements waited: the ceilings
// are still charged what was spent (pending and rate state are gone).
func TestSpoolAfterRedisLostItsData(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	sp, _ := redisstore.OpenSpool("")
	lost := make(chan string, 1)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Spool: sp, SettleTimeout: 200 * time.Millisecond,
		OnLost: func(p string) { lost <- p }})
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 100*budget.Dollar)
	r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if o, err := e.Settle(bg, r, budget.Amounts{Cost: 424_242}); err != nil || o != budget.Spooled {
		t.Fatalf("settle with Redis down: %v %v", o, err)
	}
	srv.Restart() // no persistence: empty
	// The store finds its write mark gone: the org waits for its rebuild
	// from the ledger, and the settlement stays in the spool meanwhile.
	if n, _ := sp.Replay(bg, s); n != 0 {
		t.Fatalf("replayed %d before the org was rebuilt", n)
	}
	if p := <-lost; p != "acme" {
		t.Fatalf("OnLost(%q)", p)
	}
	if err := s.Rebuilt(bg, "acme"); err != nil {
		t.Fatal(err)
	}
	if n := replayAll(t, sp, s); n != 1 {
		t.Fatalf("replayed %d", n)
	}
	if spent, _ := spentOf(t, rdb, "tg", l); spent != 424_242 {
		t.Fatalf("spent %d after Redis lost its data, want the spooled 424242", spent)
	}
	if n, _ := sp.Replay(bg, s); n != 0 {
		t.Fatal("replayed twice")
	}
}

// Scripts flushed from Redis mid-load are reloaded (EVALSHA falls back to
// EVAL on NOSCRIPT) without errors or double charges.
func TestScriptFlushUnderLoad(t *testing.T) { scriptFlushUnderLoad(t, nil) }

// The same with budget leases, flushed every 5 ms during the load.
func TestScriptFlushUnderLoadLeased(t *testing.T) {
	scriptFlushUnderLoad(t, &redisstore.LeaseOptions{Flush: 5 * time.Millisecond})
}

func scriptFlushUnderLoad(t *testing.T, leases *redisstore.LeaseOptions) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Leases: leases})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go s.RunLeases(ctx)
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 1000*budget.Dollar)
	stop := make(chan struct{})
	var flushes atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				if rdb.ScriptFlush(bg).Err() == nil {
					flushes.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var want atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			// At least 150 each, and on until the scripts were flushed 20
			// times (a leased load can be over before that).
			for i := 0; i < 150 || (flushes.Load() < 20 && i < 100_000); i++ {
				cost := budget.Money(1 + w*1000 + i%1000)
				r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 2 * cost})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := e.Settle(bg, r, budget.Amounts{Cost: cost}); err != nil {
					t.Error(err)
					return
				}
				want.Add(int64(cost))
			}
		})
	}
	wg.Wait()
	close(stop)
	if flushes.Load() < 10 {
		t.Fatalf("only %d flushes happened during the load", flushes.Load())
	}
	cancel()
	if err := s.ReturnLeases(bg); err != nil {
		t.Fatal(err)
	}
	if spent, pending := spentOf(t, rdb, "tg", l); spent != want.Load() || pending != 0 {
		t.Fatalf("spent %d pending %d, want %d", spent, pending, want.Load())
	}
}

// A gateway that dies between reserve and settle: another instance's
// sweeper charges the reservation in full after its lease; if the first
// one was only slow, its late settlement corrects the charge.
func TestAnotherInstanceSweepsADeadGatewaysLease(t *testing.T) {
	srv := redistest.Start(t)
	clock := testkit.NewClock(time.Now()) // the leases run out on it
	dead := redisstore.New(srv.Client(), redisstore.Options{Prefix: "tg", Now: clock.Now})
	alive := redisstore.New(srv.Client(), redisstore.Options{Prefix: "tg", Partitions: []string{"acme"}, Now: clock.Now})
	l := teamCeiling("acme", 10*budget.Dollar)
	r, _, err := budget.NewEngine(dead, 300*time.Millisecond).Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 3 * budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := alive.Sweep(bg); err != nil || n != 0 {
		t.Fatalf("sweep before the lease ends: %d %v", n, err)
	}
	clock.Advance(400 * time.Millisecond)
	if n, err := alive.Sweep(bg); err != nil || n != 1 {
		t.Fatalf("sweep after the lease: %d %v", n, err)
	}
	if spent, pending := spentOf(t, srv.Client(), "tg", l); spent != int64(3*budget.Dollar) || pending != 0 {
		t.Fatalf("spent %d pending %d", spent, pending)
	}
	// The gateway was only slow: its settlement corrects the sweep's
	// charge to what it reports, once.
	if o, err := dead.Settle(bg, r.ID, budget.Amounts{Cost: 1}); err != nil || o != budget.Corrected {
		t.Fatalf("late settle: %v %v", o, err)
	}
	if spent, _ := spentOf(t, srv.Client(), "tg", l); spent != 1 {
		t.Fatalf("spent %d after the late settlement, want 1", spent)
	}
	if o, err := dead.Settle(bg, r.ID, budget.Amounts{Cost: 2}); err != nil || o != budget.AlreadySettled {
		t.Fatalf("a replay of the late settle: %v %v", o, err)
	}
}

// Four instances, 64 clients each, one $10 ceiling: spend never passes it,
// not even for a moment, and ends equal to the sum of settlements.
func TestManyInstancesShareOneCeiling(t *testing.T) { manyInstancesShareOneCeiling(t, nil) }

// The same with budget leases: Redis's spent + pending (the instances'
// slices among it) never passes the ceiling, and once the leases go back
// the spend is exactly the settlements'.
func TestManyInstancesShareOneCeilingLeased(t *testing.T) {
	manyInstancesShareOneCeiling(t, &redisstore.LeaseOptions{})
}

func manyInstancesShareOneCeiling(t *testing.T, leases *redisstore.LeaseOptions) {
	srv := redistest.Start(t)
	const ceiling = 10 * budget.Dollar
	l := teamCeiling("acme", ceiling)
	watch := srv.Client()
	stop, watched := make(chan struct{}), make(chan struct{})
	var watchErr atomic.Value
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if spent, pending := spentOf(t, watch, "tg", l); spent > int64(ceiling) || spent+pending > int64(ceiling) {
				watchErr.Store(errors.New("ceiling passed: spent " + strconv.FormatInt(spent, 10) + " pending " + strconv.FormatInt(pending, 10)))
			}
		}
	}()
	var settled, admitted, refused atomic.Int64
	var wg, loops sync.WaitGroup
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var stores []*redisstore.Store
	for inst := range 4 {
		// Generous timeouts: 256 clients under -race on a shared machine
		// can pass the 100 ms default and trip the breaker, which is the
		// outage tests' subject, not this one's.
		s := redisstore.New(srv.Client(), redisstore.Options{Prefix: "tg", Timeout: 5 * time.Second, SettleTimeout: 5 * time.Second, Leases: leases})
		stores = append(stores, s)
		loops.Go(func() { s.RunLeases(ctx) })
		e := budget.NewEngine(s, time.Minute)
		for c := range 64 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(inst), uint64(c)))
				for range 40 {
					est := budget.Money(1_000 + rng.IntN(40_000))
					r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: est})
					if budget.IsBudgetRefusal(err) {
						refused.Add(1)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					admitted.Add(1)
					actual := budget.Money(rng.Int64N(int64(est) + 1))
					if _, err := e.Settle(bg, r, budget.Amounts{Cost: actual}); err != nil {
						t.Error(err)
						return
					}
					settled.Add(int64(actual))
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	<-watched // before the test ends and its client closes
	if err, _ := watchErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	cancel()
	loops.Wait()
	for _, s := range stores {
		if err := s.ReturnLeases(bg); err != nil {
			t.Fatal(err)
		}
	}
	spent, pending := spentOf(t, watch, "tg", l)
	if spent != settled.Load() || pending != 0 || spent > int64(ceiling) {
		t.Fatalf("spent %d pending %d, settled %d, ceiling %d", spent, pending, settled.Load(), ceiling)
	}
	if refused.Load() == 0 {
		t.Fatalf("nothing was refused (%d admitted): the ceiling was never reached", admitted.Load())
	}
	t.Logf("admitted %d, refused %d, spent %v of %v", admitted.Load(), refused.Load(), budget.Money(spent), ceiling)
}

// A ceiling finance changes through one instance binds every instance's
// very next reservation: the override lives in Redis, read in the script.
func TestRuntimeCeilingSeenByEveryInstance(t *testing.T) {
	srv := redistest.Start(t)
	a := budget.NewEngine(redisstore.New(srv.Client(), redisstore.Options{}), time.Minute)
	b := budget.NewEngine(redisstore.New(srv.Client(), redisstore.Options{}), time.Minute)
	l := teamCeiling("acme", 10*budget.Dollar)
	if _, _, err := b.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 2 * budget.Dollar}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCeiling(bg, l, int64(2*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 1})
	var refused *budget.RefusedError
	if !errors.As(err, &refused) || refused.Result.Status[0].Capacity != int64(2*budget.Dollar) {
		t.Fatalf("instance b after a's change: %v", err)
	}
}

// A Redis that pauses between answers (DEBUG SLEEP: busy, not down) makes
// reservations time out now and then, but does not open the store's
// breaker: refusing everyone for a second because some calls were slow
// would turn a slow Redis, or a CPU-starved gateway, into an outage.
func TestSlowRedisIsNotDown(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	s := redisstore.New(srv.Client(), redisstore.Options{Timeout: 20 * time.Millisecond})
	e := budget.NewEngine(s, time.Minute)
	l := teamCeiling("acme", 10*budget.Dollar)
	if _, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 1}); err != nil {
		t.Fatal(err) // the gateway was serving
	}
	stop, paused := make(chan struct{}), make(chan struct{})
	var pauses atomic.Int64
	go func() {
		defer close(paused)
		side := srv.Client()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			side.Do(bg, "DEBUG", "SLEEP", "0.06") // Redis answers nobody for 60 ms of every 100
			pauses.Add(1)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// Sixteen callers at once: a pause makes all of their calls time out
	// together, as a busy gateway's do.
	var timeouts, calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ; pauses.Load() < 20; calls.Add(1) {
				r, _, err := e.Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: 1})
				if errors.Is(err, gobreaker.ErrOpenState) {
					errs <- fmt.Errorf("the breaker opened on a Redis that answers (after %d timeouts)", timeouts.Load())
					return
				}
				if err != nil {
					if !errors.Is(err, budget.ErrStoreUnavailable) {
						errs <- err
						return
					}
					timeouts.Add(1)
					continue
				}
				if _, err := e.Settle(bg, r, budget.Amounts{Cost: 1}); err != nil && !errors.Is(err, budget.ErrStoreUnavailable) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(stop)
	<-paused
	t.Logf("%d of %d reservations timed out", timeouts.Load(), calls.Load())
	if timeouts.Load() < 16 {
		t.Fatalf("%d of %d reservations timed out: Redis was not slow enough to test anything", timeouts.Load(), calls.Load())
	}
}

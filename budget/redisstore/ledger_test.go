package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// sink is a ledger that keeps entries by id and fails while told to.
type sink struct {
	mu      sync.Mutex
	entries map[string]budget.Entry
	calls   int
	fail    int // fail this many calls first
}

func (s *sink) store(_ context.Context, es []budget.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail > 0 {
		s.fail--
		return errors.New("ledger down")
	}
	for _, e := range es {
		s.entries[e.ID()] = e
	}
	return nil
}

func (s *sink) wait(t *testing.T, n int) map[string]budget.Entry {
	t.Helper()
	testkit.WaitFor(10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.entries) >= n
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) != n {
		t.Fatalf("the sink holds %d entries, want %d", len(s.entries), n)
	}
	return s.entries
}

func TestLedgerStreamSingleNode(t *testing.T) {
	ledgerStream(t, redistest.Start(t).Client())
}

func TestLedgerStreamCluster(t *testing.T) {
	ledgerStream(t, redistest.StartCluster(t, 3).Client(t))
}

// Every way spend lands writes exactly one ledger entry in the same script:
// a settlement (not its replay), a lease the sweeper charges (at the
// reservation) and the late settlement that corrects it (the difference),
// spend made without a reservation.
// The consumer moves them through sink failures and a dead consumer.
func ledgerStream(t *testing.T, rdb redis.UniversalClient) {
	prefix := fmt.Sprintf("t%d", prefixes.Add(1))
	clock := testkit.NewClock(time.Now())
	s := redisstore.New(rdb, redisstore.Options{Prefix: prefix, Ledger: true, Partitions: []string{"acme", "beta"}, Now: clock.Now})
	e := budget.NewEngine(s, time.Minute)
	short := budget.NewEngine(s, 50*time.Millisecond)
	acme, beta := teamCeiling("acme", 10*budget.Dollar), teamCeiling("beta", 10*budget.Dollar)
	entry := func(org string, reserved budget.Money) *budget.Entry {
		return &budget.Entry{Time: time.Now(), RequestID: fmt.Sprintf("req-%s-%d", org, reserved), Org: org, Team: "t",
			Key: "k", Model: "m", Cost: reserved, Reserved: reserved, Served: true, Usage: budget.Usage{Estimated: true}}
	}

	// Settled, then settled again: one entry, with the actual cost.
	pre := entry("acme", 3000)
	r1, _, err := e.ReserveFor(bg, []budget.Limit{acme}, budget.Amounts{Cost: 3000}, pre)
	if err != nil {
		t.Fatal(err)
	}
	fin := *pre
	fin.Cost, fin.Usage = 1234, budget.Usage{InputTokens: 10, OutputTokens: 5}
	for range 2 {
		if _, err := e.SettleEntry(bg, r1, budget.Amounts{Cost: 1234}, &fin); err != nil {
			t.Fatal(err)
		}
	}
	// Never settled: the sweeper charges the reservation and its entry.
	r2, _, err := short.ReserveFor(bg, []budget.Limit{beta}, budget.Amounts{Cost: 7000}, entry("beta", 7000))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * time.Millisecond)
	if n, err := s.Sweep(bg); err != nil || n != 1 {
		t.Fatalf("swept %d, %v", n, err)
	}
	late := *entry("beta", 7000)
	late.Cost = 10
	if o, err := short.SettleEntry(bg, r2, budget.Amounts{Cost: 10}, &late); err != nil || o != budget.Corrected {
		t.Fatalf("late settlement: %v %v", o, err)
	}
	// Spend without a reservation (a request let through while the store
	// was away).
	un := entry("acme", 555)
	if err := e.RecordUnreserved(bg, []budget.Limit{acme}, budget.Amounts{Cost: 555}, un); err != nil {
		t.Fatal(err)
	}
	// An org the store was not configured with (added by a reload).
	gamma := teamCeiling("gamma", 10*budget.Dollar)
	r3, _, err := e.ReserveFor(bg, []budget.Limit{gamma}, budget.Amounts{Cost: 40}, entry("gamma", 40))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SettleEntry(bg, r3, budget.Amounts{Cost: 40}, entry("gamma", 40)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]int64{"acme": 2, "beta": 2, "gamma": 1} {
		if n, err := rdb.XLen(bg, s.LedgerStream(p)).Result(); err != nil || n != want {
			t.Fatalf("stream %s holds %d entries (%v), want %d", p, n, err, want)
		}
	}

	// A consumer that read the acme entries and died before storing them.
	if err := rdb.XGroupCreateMkStream(bg, s.LedgerStream("acme"), "tollgate-ledger", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(bg, &redis.XReadGroupArgs{Group: "tollgate-ledger", Consumer: "dead",
		Streams: []string{s.LedgerStream("acme"), ">"}, Count: 10}).Err(); err != nil {
		t.Fatal(err)
	}
	sk := &sink{entries: map[string]budget.Entry{}, fail: 3}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ConsumeLedger(ctx, sk.store, redisstore.ConsumerOptions{Name: "live", Partitions: []string{"acme", "beta"},
			Block: 50 * time.Millisecond, ClaimIdle: 200 * time.Millisecond, ForgetAfter: 300 * time.Millisecond})
	}()
	got := sk.wait(t, 5)
	// The dead consumer, holding nothing now, leaves the group.
	var cs []redis.XInfoConsumer
	if !testkit.WaitFor(5*time.Second, func() bool {
		var err error
		cs, err = rdb.XInfoConsumers(bg, s.LedgerStream("acme"), "tollgate-ledger").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(cs) == 1 && cs[0].Name == "live"
	}) {
		t.Fatalf("consumers left in the group: %+v", cs)
	}
	cancel()
	<-done

	if g := got[r1.ID]; g.Cost != 1234 || g.Outcome != "settled" || g.Usage.InputTokens != 10 {
		t.Errorf("settled entry %+v", g)
	}
	if g := got[r2.ID]; g.Cost != 7000 || g.Outcome != "expired" || !g.Usage.Estimated {
		t.Errorf("expired entry %+v: want the reservation charged in full", g)
	}
	// The late settlement's entry corrects it: together they are the 10 µ$
	// the request really cost.
	if g := got[r2.ID+"/corrected"]; g.Cost != 10-7000 || g.Outcome != "corrected" {
		t.Errorf("correction entry %+v: want -6990 µ$", g)
	}
	if g := got[un.ReservationID]; g.Cost != 555 || g.Outcome != "settled" || un.ReservationID == "" {
		t.Errorf("unreserved entry %+v", g)
	}
	if g := got[r3.ID]; g.Org != "gamma" || g.Cost != 40 {
		t.Errorf("the unconfigured org's entry %+v", g)
	}
	for _, p := range []string{"acme", "beta", "gamma"} {
		if n, _ := rdb.XLen(bg, s.LedgerStream(p)).Result(); n != 0 {
			t.Errorf("stream %s still holds %d entries after they were stored", p, n)
		}
	}
	if sk.calls < 4 {
		t.Errorf("the sink was called %d times: its failures were not retried", sk.calls)
	}
}

// A day meter's key lives for its day plus the day budgets' retention, not
// the month-long fallback: meters are one key per key × model × day.
func TestMeterKeyLifetime(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := redisstore.New(rdb, redisstore.Options{})
	e := budget.NewEngine(s, time.Minute)
	meter := budget.Limit{Bucket: "spend:acme/ml/k/m:spend-day", Name: "spend-day", Partition: "acme", Scope: budget.ScopeKey,
		Kind: budget.Meter, Unit: budget.Microdollars, Period: budget.Day}
	r, _, err := e.Reserve(bg, []budget.Limit{meter}, budget.Amounts{Cost: 500})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Settle(bg, r, budget.Amounts{Cost: 321}); err != nil {
		t.Fatal(err)
	}
	key := "tg:{acme}:c:" + meter.Bucket + ":" + budget.PeriodID(budget.Day, time.Now(), nil)
	ttl, err := rdb.PTTL(bg, key).Result()
	if err != nil || ttl <= 0 || ttl > 9*24*time.Hour {
		t.Fatalf("meter key %s lives %v (%v), want at most a day and the 8-day retention", key, ttl, err)
	}
	if spent, _ := spentOf(t, rdb, "tg", meter); spent != 321 {
		t.Fatalf("meter spent %d, want 321", spent)
	}
}

// Shutdown while entries are being stored: they are stored and
// acknowledged before the consumer returns, not left pending in the group
// for another instance to take over after ClaimIdle (30 s).
func TestShutdownStoresTheEntriesItRead(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Ledger: true, Partitions: []string{"acme"}})
	e := budget.NewEngine(s, time.Minute)
	acme := teamCeiling("acme", 10*budget.Dollar)
	for i := range 5 {
		en := &budget.Entry{Time: time.Now(), RequestID: fmt.Sprintf("req-%d", i), Org: "acme", Team: "t", Key: "k", Model: "m", Cost: 10, Reserved: 10}
		r, _, err := e.ReserveFor(bg, []budget.Limit{acme}, budget.Amounts{Cost: 10}, en)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.SettleEntry(bg, r, budget.Amounts{Cost: 10}, en); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var stored atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ConsumeLedger(ctx, func(ctx context.Context, es []budget.Entry) error {
			close(entered)
			<-release // a slow PostgreSQL
			if err := ctx.Err(); err != nil {
				return err
			}
			stored.Add(int64(len(es)))
			return nil
		}, redisstore.ConsumerOptions{Name: "gw-1"})
	}()
	<-entered
	cancel() // shutdown, the entries read and not yet stored
	close(release)
	<-done
	if n := stored.Load(); n != 5 {
		t.Fatalf("%d entries stored at shutdown, want the 5 read", n)
	}
	pending, err := rdb.XPending(bg, s.LedgerStream("acme"), "tollgate-ledger").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 0 {
		t.Fatalf("%d entries left pending for another instance", pending.Count)
	}
}

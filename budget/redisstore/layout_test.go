package redisstore_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// everyKind is one limit of each kind and algorithm, and a meter.
func everyKind() []budget.Limit {
	mk := func(bucket string, k budget.Kind, u budget.Unit, amount int64) budget.Limit {
		return budget.Limit{Bucket: bucket, Name: bucket, Partition: "acme", Scope: budget.ScopeTeam, Kind: k, Unit: u, Amount: amount}
	}
	ceiling := mk("team:acme/ml:usd-month", budget.Ceiling, budget.Microdollars, 1<<50)
	ceiling.Period = budget.Month
	meter := mk("spend:acme/ml/k/m:day", budget.Meter, budget.Microdollars, 0)
	meter.Period = budget.Day
	out := []budget.Limit{ceiling, meter}
	for _, alg := range []budget.Algorithm{budget.TokenBucket, budget.FixedWindow, budget.SlidingWindow, budget.SlidingLog} {
		l := mk("key:acme/k:rpm-"+alg.String(), budget.Rate, budget.Requests, 10_000)
		l.Window, l.Algorithm = time.Minute, alg
		out = append(out, l)
	}
	return append(out, mk("team:acme/ml:in-flight", budget.Concurrency, budget.Requests, 1<<20))
}

// A settled reservation deletes its record and leaves no key behind: after
// the first requests made the counters, Redis holds the same keys however
// many more are settled. (The clock is pinned mid-minute, so no window
// rolls over meanwhile.)
func TestSettledRequestsLeaveNothingBehind(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	now := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	e := budget.NewEngine(redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Ledger: true, Now: func() time.Time { return now }}), time.Minute)
	limits := everyKind()
	pairs := func(n int) {
		for range n {
			entry := benchEntry()
			r, _, err := e.ReserveFor(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10}, entry)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.SettleEntry(bg, r, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}, entry); err != nil {
				t.Fatal(err)
			}
		}
	}
	pairs(5)
	keys, err := rdb.Keys(bg, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	pairs(500)
	after, err := rdb.Keys(bg, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(keys) {
		t.Fatalf("500 settled requests left %d keys: before %v, after %v", len(after)-len(keys), keys, after)
	}
	for _, k := range after {
		if strings.Contains(k, ":done:") || strings.Contains(k, ":res:") || strings.HasSuffix(k, ":open") || strings.HasSuffix(k, ":leases") {
			t.Errorf("per-reservation state left behind: %s", k)
		}
		if ttl := rdb.PTTL(bg, k).Val(); ttl < 0 && !strings.HasSuffix(k, ":ceilings") && !strings.HasSuffix(k, ":ledger") && !strings.Contains(k, ":n:") {
			t.Errorf("%s never expires (PTTL %v)", k, ttl)
		}
	}
}

// A settlement replayed from a spool after its record was deleted (the
// first attempt reached Redis, its reply did not) changes nothing, also in
// a process that does not remember settling it: the partition's epoch tells
// a record deleted by its settlement from one Redis lost.
func TestReplayAfterTheRecordIsGoneChargesOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	l := teamCeiling("acme", 100*budget.Dollar)
	sp, _ := redisstore.OpenSpool("")
	first := redisstore.New(rdb, redisstore.Options{Spool: sp})
	r, _, err := budget.NewEngine(first, time.Minute).Reserve(bg, []budget.Limit{l}, budget.Amounts{Cost: budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := rdb.HGet(bg, "tg:{acme}:ceilings", "!epoch").Int64()
	if err != nil {
		t.Fatal(err)
	}
	bucket := "tg:{acme}:c:" + l.Bucket + ":" + budget.PeriodID(l.Period, time.Now(), nil)
	call := &redisstore.SettleCall{ID: r.ID, Actual: []int64{300_000}, Epoch: epoch, Kinds: []string{"c"}, Buckets: []string{bucket}}
	for range 2 { // applied, then replayed
		if err := sp.Add(call); err != nil {
			t.Fatal(err)
		}
	}
	restarted := redisstore.New(rdb, redisstore.Options{Spool: sp})
	if n, err := sp.Replay(bg, restarted); n != 2 || err != nil {
		t.Fatalf("replayed %d: %v", n, err)
	}
	if spent, pending := spentOf(t, rdb, "tg", l); spent != 300_000 || pending != 0 {
		t.Fatalf("spent %d pending %d, want 300000 once and nothing pending", spent, pending)
	}
	// The same call under another epoch is a settlement Redis lost the
	// record of: it is charged from the call, once.
	rdb.HSet(bg, "tg:{acme}:ceilings", "!epoch", epoch+1)
	call.ID = "acme/lost"
	for range 2 {
		if err := sp.Add(call); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := sp.Replay(bg, redisstore.New(rdb, redisstore.Options{Spool: sp})); n != 2 || err != nil {
		t.Fatalf("replayed %d: %v", n, err)
	}
	if spent, _ := spentOf(t, rdb, "tg", l); spent != 600_000 {
		t.Fatalf("spent %d, want 600000: the lost record charged once", spent)
	}
}

// Reservations recorded by a version that kept one hash per reservation
// (tg:{org}:res:<id>) are still settled from a spool and swept.
func TestRecordsOfTheOldLayoutAreSettledAndSwept(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	l := teamCeiling("acme", 100*budget.Dollar)
	bucket := "tg:{acme}:c:" + l.Bucket + ":" + budget.PeriodID(l.Period, time.Now(), nil)
	old := func(id string, expiry time.Time) {
		rdb.HSet(bg, "tg:{acme}:res:"+id, "d", "c\t"+bucket+"\t1000000", "exp", strconv.FormatInt(expiry.UnixMicro(), 10))
		rdb.ZAdd(bg, "tg:{acme}:leases", redisZ(expiry, id))
		rdb.HIncrBy(bg, bucket, "pending", 1_000_000)
	}
	old("acme/spooled", time.Now().Add(time.Minute))
	old("acme/dead", time.Now().Add(-time.Second))
	sp, _ := redisstore.OpenSpool("")
	s := redisstore.New(rdb, redisstore.Options{Spool: sp, Partitions: []string{"acme"}})
	if err := sp.Add(&redisstore.SettleCall{ID: "acme/spooled", Actual: []int64{250_000}, Kinds: []string{"c"}, Buckets: []string{bucket}}); err != nil {
		t.Fatal(err)
	}
	if n, err := sp.Replay(bg, s); n != 1 || err != nil {
		t.Fatalf("replayed %d: %v", n, err)
	}
	if n, err := s.Sweep(bg); n != 1 || err != nil {
		t.Fatalf("swept %d: %v", n, err)
	}
	if spent, pending := spentOf(t, rdb, "tg", l); spent != 1_250_000 || pending != 0 {
		t.Fatalf("spent %d pending %d, want 1250000 (the settled 250000, the swept 1000000) and 0", spent, pending)
	}
	if n := rdb.Exists(bg, "tg:{acme}:res:acme/spooled", "tg:{acme}:res:acme/dead").Val(); n != 0 {
		t.Fatalf("%d old records left", n)
	}
}

func redisZ(at time.Time, id string) redis.Z {
	return redis.Z{Score: float64(at.UnixMicro()), Member: id}
}

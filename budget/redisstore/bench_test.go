package redisstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// requestLimits is what a typical request is checked against: org and team
// budgets, a team token rate, a key request rate and a concurrency limit.
func requestLimits() []budget.Limit {
	mk := func(bucket string, k budget.Kind, u budget.Unit, amount int64) budget.Limit {
		l := budget.Limit{Bucket: bucket, Name: bucket, Partition: "acme", Scope: budget.ScopeTeam, Kind: k, Unit: u, Amount: amount}
		switch k {
		case budget.Rate:
			l.Window = time.Minute
		case budget.Ceiling:
			l.Period = budget.Month
		}
		return l
	}
	return []budget.Limit{
		mk("org:acme:usd-month", budget.Ceiling, budget.Microdollars, 1<<50),
		mk("team:acme/ml:usd-day", budget.Ceiling, budget.Microdollars, 1<<50),
		mk("team:acme/ml:tpm", budget.Rate, budget.Tokens, 1<<40),
		mk("key:acme/k:rpm", budget.Rate, budget.Requests, 1<<40),
		mk("team:acme/ml:in-flight", budget.Concurrency, budget.Requests, 1<<20),
	}
}

// countingHook counts the commands a client sends: each is a round trip.
type countingHook struct{ calls map[string]int }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.calls[cmd.Name()]++
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.calls["pipeline"]++
		return next(ctx, cmds)
	}
}

// One reservation is one Redis round trip, one settlement another.
func TestOneRoundTripToReserveOneToSettle(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	e := budget.NewEngine(redisstore.New(rdb, redisstore.Options{}), time.Minute)
	limits := requestLimits()
	warm, _, err := e.Reserve(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Settle(bg, warm, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}); err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{calls: map[string]int{}}
	rdb.AddHook(hook)
	const n = 50
	for range n {
		r, _, err := e.Reserve(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(bg, r, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}); err != nil {
			t.Fatal(err)
		}
	}
	calls := hook.calls
	if calls["evalsha"] != 2*n || len(calls) != 1 {
		t.Fatalf("commands for %d reserve+settle pairs: %v, want exactly %d EVALSHA", n, calls, 2*n)
	}
}

// BenchmarkReserveSettle: one reservation against five limits and its
// settlement, against a redis-server started for the benchmark.
//
//	go test -run XXX -bench ReserveSettle -cpu 1,64 ./budget/redisstore/
func BenchmarkReserveSettle(b *testing.B) {
	benchPairs(b, requestLimits(), nil)
}

// benchPairs reserves and settles against limits from parallel callers,
// on a redis-server started for the benchmark; entry, if set, makes each
// pair carry ledger entries (the store's Ledger option on).
func benchPairs(b *testing.B, limits []budget.Limit, entry func() *budget.Entry) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
	defer rdb.Close()
	e := budget.NewEngine(redisstore.New(rdb, redisstore.Options{Timeout: time.Second, Ledger: entry != nil}), time.Minute)
	if entry == nil {
		entry = func() *budget.Entry { return nil }
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, _, err := e.ReserveFor(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10}, entry())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.SettleEntry(bg, r, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}, entry()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchEntry is a ledger entry of typical size.
func benchEntry() *budget.Entry {
	return &budget.Entry{Time: time.Now(), RequestID: "B6YQ2S7GZ4XKJQ3MNT5W", Org: "acme", Team: "ml", Key: "k1", User: "user-1234",
		Route: "/v1/chat/completions", Model: "gpt-4o-mini", Upstream: "openai", Usage: budget.Usage{InputTokens: 1234, OutputTokens: 321},
		Cost: 378, Reserved: 9_999, ReservedTokens: 17_618, Served: true}
}

// BenchmarkReserveSettleLedger is BenchmarkReserveSettle with the ledger
// outbox on: the reservation carries its provisional entry and the
// settlement appends the final one to the ledger stream (nobody consumes
// it here).
//
//	go test -run XXX -bench ReserveSettleLedger -cpu 1,64 ./budget/redisstore/
func BenchmarkReserveSettleLedger(b *testing.B) {
	benchPairs(b, requestLimits(), benchEntry)
}

// BenchmarkReserveSettleMeters is BenchmarkReserveSettle with the two
// spend meters every gateway request also carries (shadow budgets for the
// key × model's day and month).
//
//	go test -run XXX -bench ReserveSettleMeters -cpu 1,64 ./budget/redisstore/
func BenchmarkReserveSettleMeters(b *testing.B) {
	limits := requestLimits()
	for _, p := range []budget.Period{budget.Day, budget.Month} {
		limits = append(limits, budget.Limit{Bucket: "spend:acme/ml/k/m:" + p.String(), Name: "spend", Partition: "acme", Scope: budget.ScopeKey,
			Kind: budget.Meter, Unit: budget.Microdollars, Period: p})
	}
	benchPairs(b, limits, nil)
}

// BenchmarkRedisCost measures what one gateway request costs Redis, beside
// a trivial script on the same server in the same run: Redis CPU (INFO
// cpu), commands run (INFO commandstats, those scripts call included) and
// keys left behind (DBSIZE), per reserve+settle pair of the limits every
// gateway request of bench/tollgate.yaml carries (five limits, two spend
// meters, a ledger entry). Load-independent figures, unlike ns/op.
//
//	go test -run XXX -bench RedisCost -benchtime 5000x ./budget/redisstore/
//
// TOLLGATE_BENCH_REDIS=host:port runs it against that server instead of
// one of its own (bench/redis-callgrind.sh: a redis-server under callgrind).
func BenchmarkRedisCost(b *testing.B) { redisCostOf(b, nil) }

// BenchmarkRedisCostLeased is BenchmarkRedisCost with budget leases on,
// flushed every 200 ms as in production (the figures include the flushes).
//
//	go test -run XXX -bench RedisCostLeased -benchtime 20000x ./budget/redisstore/
func BenchmarkRedisCostLeased(b *testing.B) { redisCostOf(b, &redisstore.LeaseOptions{}) }

func redisCostOf(b *testing.B, leases *redisstore.LeaseOptions) {
	addr := os.Getenv("TOLLGATE_BENCH_REDIS")
	if addr == "" {
		addr = redistest.Start(b).Addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	store := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Ledger: true, Leases: leases})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go store.RunLeases(ctx)
	e := budget.NewEngine(store, time.Minute)
	limits := requestLimits()
	for _, p := range []budget.Period{budget.Day, budget.Month} {
		limits = append(limits, budget.Limit{Bucket: "spend:acme/ml/k/m:" + p.String(), Name: "spend", Partition: "acme", Scope: budget.ScopeKey,
			Kind: budget.Meter, Unit: budget.Microdollars, Period: p})
	}
	pair := func() {
		r, _, err := e.ReserveFor(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10}, benchEntry())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.SettleEntry(bg, r, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}, benchEntry()); err != nil {
			b.Fatal(err)
		}
	}
	pair() // the counters exist from here on
	trivial := redis.NewScript("return 1")
	if err := trivial.Run(bg, rdb, nil).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := redisCost(b, rdb)
	for range b.N {
		pair()
	}
	if err := store.FlushLeases(bg); err != nil { // the last of the leased spend
		b.Fatal(err)
	}
	c1 := redisCost(b, rdb)
	for range b.N {
		if err := trivial.Run(bg, rdb, nil).Err(); err != nil {
			b.Fatal(err)
		}
	}
	c2 := redisCost(b, rdb)
	b.StopTimer()
	n := float64(b.N)
	pairCPU, trivialCPU := (c1.cpu-c0.cpu)/n, (c2.cpu-c1.cpu)/n
	b.ReportMetric(pairCPU, "redis-µs/pair")
	b.ReportMetric(trivialCPU, "redis-µs/trivial")
	b.ReportMetric(pairCPU/trivialCPU, "pair/trivial")
	b.ReportMetric((c1.script-c0.script)/n, "script-µs/pair")
	b.ReportMetric((c2.script-c1.script)/n, "script-µs/trivial")
	b.ReportMetric(float64((c1.calls-c1.scripts)-(c0.calls-c0.scripts))/n, "commands/pair") // run by the scripts
	b.ReportMetric(float64(c1.scripts-c0.scripts)/n, "scripts/pair")
	b.ReportMetric(float64(c1.keys-c0.keys)/n, "keys-left/pair")
}

// cost is what Redis reports having spent: CPU (user + system) and time in
// scripts, in µs, commands run and keys held.
type cost struct {
	cpu, script          float64
	calls, scripts, keys int64
}

// redisCost reads what Redis has spent so far.
func redisCost(b *testing.B, rdb *redis.Client) (c cost) {
	info, err := rdb.Info(bg, "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			c.cpu += f * 1e6
		case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info" && k != "cmdstat_dbsize":
			calls, rest, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			c.calls += n
			if k == "cmdstat_evalsha" || k == "cmdstat_eval" {
				c.scripts += n
				us, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
				f, _ := strconv.ParseFloat(us, 64)
				c.script += f
			}
		}
	}
	var err2 error
	if c.keys, err2 = rdb.DBSize(bg).Result(); err2 != nil {
		b.Fatal(err2)
	}
	return c
}

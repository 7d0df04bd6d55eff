package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// roundTrips counts what a client sends: single commands and pipelines.
type roundTrips struct{ single, pipelines, inPipelines atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.inPipelines.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Settlements that wait at the same time go to Redis together: 200
// settling at once take a few round trips, not 200 — also just after a
// SCRIPT FLUSH, when a batch finds settle.lua missing and sends it again —
// and each is settled, once, at its own amounts.
func TestConcurrentSettlementsShareRoundTrips(t *testing.T) {
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"node", redistest.Start(t).Client()}, {"cluster", redistest.StartCluster(t, 3).Client(t)}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := "b" + c.name
			s := redisstore.New(c.rdb, redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second, SettleTimeout: 5 * time.Second})
			e := budget.NewEngine(s, time.Minute)
			limits := requestLimits()
			const n = 200
			rs := make([]*budget.Reservation, n)
			for i := range rs {
				r, _, err := e.Reserve(bg, limits, budget.Amounts{Tokens: 100, Requests: 1, Cost: 1000})
				if err != nil {
					t.Fatal(err)
				}
				rs[i] = r
			}
			if err := c.rdb.ScriptFlush(bg).Err(); err != nil {
				t.Fatal(err)
			}
			hook := &roundTrips{}
			c.rdb.AddHook(hook)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, r := range rs {
				wg.Go(func() {
					<-start
					o, err := e.Settle(bg, r, budget.Amounts{Tokens: 60, Requests: 1, Cost: budget.Money(600 + i)})
					if err != nil || o != budget.Settled {
						t.Errorf("settle %d: %v %v", i, o, err)
					}
				})
			}
			close(start)
			wg.Wait()
			trips := hook.single.Load() + hook.pipelines.Load()
			t.Logf("%d settlements: %d single commands, %d pipelines carrying %d", n, hook.single.Load(), hook.pipelines.Load(), hook.inPipelines.Load())
			if trips > n/4 {
				t.Fatalf("%d concurrent settlements took %d round trips", n, trips)
			}
			spent, pending := spentOf(t, c.rdb, prefix, budget.Limit{Bucket: limits[0].Bucket, Partition: "acme", Period: budget.Month})
			if want := int64(n*600 + n*(n-1)/2); spent != want || pending != 0 {
				t.Fatalf("spent %d pending %d, want %d and 0", spent, pending, want)
			}
			for _, r := range rs[:3] {
				if o, err := e.Settle(bg, r, budget.Amounts{Cost: 1}); err != nil || o != budget.AlreadySettled {
					t.Fatalf("settling again: %v %v", o, err)
				}
			}
		})
	}
}

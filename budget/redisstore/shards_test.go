package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// A hot rate limit split into 16 shards spreads over every master of a
// 3-master cluster, while each request still reserves its shard and its
// org's budget all or nothing: two instances × 32 clients fill a $1,000
// ceiling, spent + pending never above it at any sample, and the final
// spend is what the requests settled, to the µ$ — leases off and on.
func TestShardsSpreadOverTheClusterAndTheCeilingHolds(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	for _, mode := range []struct {
		name   string
		leases *redisstore.LeaseOptions
	}{{"exact", nil}, {"leased", &redisstore.LeaseOptions{}}} {
		t.Run(mode.name, func(t *testing.T) {
			rdb := cl.Client(t)
			prefix := fmt.Sprintf("sh%d", prefixes.Add(1))
			const shards, ceiling = 16, 1000 * budget.Dollar
			team := budget.Limit{Bucket: "team:acme/ml:usd-month", Name: "usd-month", Partition: "acme", Scope: budget.ScopeTeam,
				Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(ceiling), Period: budget.Month}
			limitsOf := func(i int) []budget.Limit {
				hot := budget.Limit{Bucket: fmt.Sprintf("org:acme:rpm#%d", i%shards), Name: "rpm", Partition: "acme", Shard: i%shards + 1,
					Scope: budget.ScopeOrg, Kind: budget.Rate, Unit: budget.Requests, Amount: 1 << 20, Window: time.Minute}
				return []budget.Limit{hot, team}
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			var stores []*redisstore.Store
			for range 2 {
				s := redisstore.New(rdb, redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second, SettleTimeout: 5 * time.Second,
					Partitions: []string{"acme"}, Shards: shards, Leases: mode.leases})
				go s.RunLeases(ctx)
				stores = append(stores, s)
			}
			ceilingKey := prefix + ":{acme}:c:" + team.Bucket + ":" + budget.PeriodID(budget.Month, time.Now(), nil)
			var over atomic.Int64
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for ctx.Err() == nil {
					v, err := rdb.HMGet(ctx, ceilingKey, "spent", "pending").Result()
					if err == nil {
						var sum int64
						for _, x := range v {
							if s, ok := x.(string); ok {
								var n int64
								fmt.Sscan(s, &n)
								sum += n
							}
						}
						if sum > int64(ceiling) {
							over.Store(sum)
						}
					}
				}
			}()
			var settled atomic.Int64
			var wg sync.WaitGroup
			deadline := time.Now().Add(30 * time.Second)
			for c := range 64 {
				e := budget.NewEngine(stores[c%2], time.Minute)
				wg.Go(func() {
					for i := c; time.Now().Before(deadline); i += 64 {
						r, _, err := e.Reserve(bg, limitsOf(i), budget.Amounts{Requests: 1, Cost: budget.Dollar})
						switch {
						case errors.Is(err, budget.ErrExhausted):
							return // the ceiling is spent, as settled
						case err != nil && budget.IsBudgetRefusal(err):
							continue // held by requests in flight, or by a slice elsewhere
						case err != nil:
							t.Errorf("reserve: %v", err)
							return
						}
						if _, err := e.Settle(bg, r, budget.Amounts{Requests: 1, Cost: budget.Dollar}); err != nil {
							t.Errorf("settle: %v", err)
							return
						}
						settled.Add(int64(budget.Dollar))
					}
					t.Errorf("client %d still not refused as exhausted after 30 s", c)
				})
			}
			wg.Wait()
			for _, s := range stores {
				if err := s.ReturnLeases(bg); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			<-sampled
			if n := over.Load(); n > 0 {
				t.Fatalf("spent + pending reached %d µ$, over the %d µ$ ceiling", n, ceiling)
			}
			spent, pending := spentOf(t, rdb, prefix, team)
			if spent != settled.Load() || pending != 0 {
				t.Fatalf("spent %d pending %d; the requests settled %d", spent, pending, settled.Load())
			}
			if spent != int64(ceiling) {
				t.Fatalf("spent %d of a %d ceiling: refused as exhausted with $1 requests still fitting", spent, ceiling)
			}
			var masters atomic.Int64
			err := rdb.ForEachMaster(bg, func(ctx context.Context, m *redis.Client) error {
				keys, err := m.Keys(ctx, prefix+":{acme~*").Result()
				if err != nil {
					return err
				}
				if len(keys) == 0 {
					return fmt.Errorf("master %s holds no shard", m.Options().Addr)
				}
				for _, k := range keys {
					_, kind, _ := strings.Cut(k, "}:")
					if !strings.HasPrefix(kind, "r:org:acme:rpm#") && !slices.Contains([]string{"ceilings", "leases", "lessees"}, kind) && !strings.HasPrefix(kind, "lessee:") {
						return fmt.Errorf("master %s: unexpected key %s in a shard", m.Options().Addr, k)
					}
				}
				masters.Add(1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := masters.Load(); n != 3 {
				t.Fatalf("looked at %d masters, want 3", n)
			}
		})
	}
}

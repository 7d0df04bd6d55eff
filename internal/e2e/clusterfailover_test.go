package e2e_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// The SRE battery's failover, on a real 3-master Redis Cluster with a
// replica each: two gateways under load from eight clients; the replica of
// the org's master stops receiving (its link cut) while the master goes on
// acknowledging; the master is killed and the replica takes over without
// those writes; the load goes on until the team's ceiling refuses. Spend
// never passes the ceiling, and the budget and the PostgreSQL ledger end
// equal to what the upstream billed. Before write marks, the lost
// reservations and settlements were read as settled and swept, their spend
// forgiven, and a team passed its ceiling by 19 %.
func TestAClusterFailoverToALaggingReplicaKeepsTheCeiling(t *testing.T) {
	for _, mode := range []string{"exact", "leased"} {
		t.Run(mode, func(t *testing.T) {
			cluster := redistest.StartClusterWithReplicas(t, 3)
			db := pgtest.New(t)
			extra := ""
			if mode == "exact" {
				extra = "    exact: true\n"
			}
			const ceiling = 40_000 // µ$; about 360 requests of test-model
			h := startWith(t, setup{
				teamLimits:   `{name: usd-month, kind: budget, unit: usd, amount: "$0.04", period: month}`,
				redisCluster: cluster.Addrs(), instances: 2, spoolDir: t.TempDir(), pgDSN: db.DSN, redisExtra: extra,
			})
			master, replica := cluster.MasterOf("tg:{acme}:ceilings")

			// The load: eight clients, each request let through by a token
			// until the failover is over, then as fast as they go.
			var served, handled, exhausted atomic.Int64
			statuses := map[int]int{}
			var mu sync.Mutex
			tokens, open := make(chan struct{}, 1000), make(chan struct{})
			release := func(n int) {
				for range n {
					tokens <- struct{}{}
				}
			}
			var wg sync.WaitGroup
			body := `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
			for w := range 8 {
				wg.Go(func() {
					deadline := time.Now().Add(90 * time.Second)
					for i := 0; time.Now().Before(deadline); i++ {
						select {
						case <-tokens:
						case <-open:
						}
						status, _, b, err := send(http.DefaultClient, h.urls[(w+i)%2], body)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						statuses[status]++
						mu.Unlock()
						handled.Add(1)
						switch status {
						case 200:
							served.Add(1)
						case 400:
							var e struct{ Error struct{ Code string } }
							_ = json.Unmarshal([]byte(b), &e)
							if e.Error.Code != "insufficient_quota" && e.Error.Code != "request_exceeds_budget_remaining" {
								t.Errorf("refused with %s", b)
							}
							exhausted.Add(1)
							return // the team's month is spent
						case 429, 503:
							// Held by requests in flight, or the store failing
							// over: again, after a client's short backoff.
							time.Sleep(20 * time.Millisecond)
						default:
							t.Errorf("status %d: %s", status, b)
							return
						}
					}
				})
			}
			handledPast := func(n int64) {
				t.Helper()
				if !testkit.WaitFor(30*time.Second, func() bool { return handled.Load() >= n }) {
					t.Fatalf("only %d requests handled", handled.Load())
				}
			}
			release(100)
			handledPast(100)
			master.Detach(replica)
			// Writes the replica will never see: requests, and in lease
			// mode the flushes that charge them.
			flushes := 0.0
			if mode == "leased" {
				flushes = leaseCalls(t, h)
			}
			release(100)
			handledPast(200)
			if mode == "leased" && !testkit.WaitFor(10*time.Second, func() bool { return leaseCalls(t, h) >= flushes+4 }) {
				t.Fatal("no lease flush while the replica lagged")
			}
			if m, _ := cluster.MasterOf("tg:{acme}:ceilings"); m != master {
				t.Fatalf("the org's slot moved to %s by itself before the test killed %s", m.Addr, master.Addr)
			}
			master.Kill()
			replica.Signal(syscall.SIGCONT)
			replica.TakeOver()
			close(open)
			wg.Wait()

			truth := h.reportedCost("test-model")
			t.Logf("%s: %d served, statuses %v, upstream billed %d µ$ against a ceiling of %d", mode, served.Load(), statuses, truth, ceiling)
			if exhausted.Load() == 0 {
				t.Fatal("the load never reached the ceiling")
			}
			if truth > ceiling {
				t.Errorf("the upstream billed %d µ$ past a ceiling of %d", truth, ceiling)
			}
			var used int64
			if !testkit.WaitFor(10*time.Second, func() bool {
				used = ownMonthBudget(t, h.urls[0]).Used
				return used == truth
			}) {
				t.Errorf("the budget holds %d µ$, the upstream billed %d", used, truth)
			}
			conn := db.Conn()
			var stored int64
			if !testkit.WaitFor(20*time.Second, func() bool {
				err := conn.QueryRow(ctx, `SELECT coalesce(sum(usd_micros), 0) FROM tollgate_ledger`).Scan(&stored)
				return err == nil && stored == truth
			}) {
				t.Errorf("the ledger holds %d µ$, the upstream billed %d", stored, truth)
			}
			replayed := 0.0
			for _, u := range h.urls {
				replayed += value(t, scrapeURL(t, u), "tollgate_store_lost_writes_total", nil)
			}
			if replayed == 0 {
				t.Error("no write was lost and replayed: the failover tested nothing")
			}
			t.Logf("%s: %v lost writes replayed; budget %d, ledger %d", mode, replayed, used, stored)
		})
	}
}

// leaseCalls is how many lease calls the gateways have made.
func leaseCalls(t *testing.T, h *harness) float64 {
	n := 0.0
	for _, u := range h.urls {
		n += value(t, scrapeURL(t, u), "tollgate_lease_calls_total", nil)
	}
	return n
}

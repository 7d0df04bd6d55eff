package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// Redis restarted without its data under two running gateways: each finds
// its write marks gone, refuses the org with 503 instead of admitting
// against zero, rebuilds the month's spend from PostgreSQL by itself and
// serves again. The budget then holds every request the upstream billed,
// before the loss and after. Before write marks, the gateways logged
// "rebuild them from the ledger" and went on admitting against zero.
//
// The same on a 3-master Redis Cluster whose masters all lose their data
// (FLUSHALL on each: what a cluster restarted without persistence holds).
func TestRedisRestartedEmptyIsRebuiltFromTheLedger(t *testing.T) {
	for _, topology := range []string{"single", "cluster"} {
		for _, mode := range []string{"exact", "leased"} {
			t.Run(topology+"/"+mode, func(t *testing.T) { redisLosesEverything(t, topology, mode) })
		}
	}
}

func redisLosesEverything(t *testing.T, topology, mode string) {
	db := pgtest.New(t)
	extra := ""
	if mode == "exact" {
		extra = "    exact: true\n"
	}
	su := setup{teamLimits: monthlyTen, instances: 2, spoolDir: t.TempDir(), pgDSN: db.DSN, redisExtra: extra}
	var lose func()
	if topology == "single" {
		srv := redistest.Start(t)
		su.redisAddr = srv.Addr
		lose = func() {
			srv.Kill()
			srv.Restart() // no persistence: empty
		}
	} else {
		cluster := redistest.StartCluster(t, 3)
		su.redisCluster = cluster.Addrs()
		lose = func() {
			for _, n := range cluster.Nodes {
				if err := n.Client().FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	h := startWith(t, su)
	body := `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	call := func(i int) (int, string) {
		status, _, b, err := send(http.DefaultClient, h.urls[i%2], body)
		if err != nil {
			t.Fatal(err)
		}
		return status, b
	}
	for i := range 6 {
		if status, b := call(i); status != 200 {
			t.Fatalf("request %d: %d %s", i, status, b)
		}
	}
	before := h.reportedCost("test-model")
	conn := db.Conn()
	var stored int64
	if !testkit.WaitFor(20*time.Second, func() bool {
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(usd_micros), 0) FROM tollgate_ledger`).Scan(&stored)
		return err == nil && stored == before
	}) {
		t.Fatalf("PostgreSQL holds %d µ$, the upstream billed %d", stored, before)
	}

	lose()

	// Every instance finds the loss at its next call and refuses
	// until it has rebuilt; then it serves.
	refused := 0
	for i := range h.urls {
		if !testkit.WaitFor(20*time.Second, func() bool {
			status, b := call(i)
			switch status {
			case 200:
				return true
			case 503:
				var e struct{ Error struct{ Code string } }
				_ = json.Unmarshal([]byte(b), &e)
				if e.Error.Code != "budget_store_unavailable" {
					t.Fatalf("refused with %s", b)
				}
				refused++
				return false
			}
			t.Fatalf("instance %d after the loss: %d %s", i, status, b)
			return false
		}) {
			t.Fatalf("instance %d did not serve again within 20 s", i)
		}
	}
	if mode == "exact" && refused < 2 {
		t.Errorf("%d refusals after the loss; each exact instance should refuse until it rebuilt", refused)
	}
	for i := range 4 {
		if status, b := call(i); status != 200 {
			t.Fatalf("request %d after the rebuild: %d %s", i, status, b)
		}
	}
	billed := h.reportedCost("test-model")
	var used int64
	if !testkit.WaitFor(10*time.Second, func() bool {
		used = ownMonthBudget(t, h.urls[0]).Used
		return used == billed
	}) {
		t.Fatalf("the budget holds %d µ$ after the loss; the upstream billed %d (%d before it)", used, billed, before)
	}
	fmt.Fprintf(testWriter{t}, "%s/%s: billed %d µ$ (%d before the loss), budget %d, %d refusals while rebuilding\n", topology, mode, billed, before, used, refused)
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

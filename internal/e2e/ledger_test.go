package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Three instances share Redis and a PostgreSQL ledger under load while
// PostgreSQL goes away, then Redis is killed and restarted, then PostgreSQL
// returns. Afterwards the ledger holds one row per request the upstream
// served, and its total equals both the settled spend in Redis and what the
// upstream reported, to the micro-dollar: nothing lost, nothing doubled.
func TestPostgresLedgerThroughOutages(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	db := pgtest.New(t)
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}`,
		sim:        simulated.Options{ChunkDelay: time.Millisecond},
		redisAddr:  srv.Addr, instances: 3, spoolDir: t.TempDir(), pgDSN: db.DSN,
		topExtra: "admin_tokens: [{name: cfo, hash: \"" + policy.HashKey(financeToken) + "\", role: finance}]\n",
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served, refused atomic.Int64
	for c := range 24 {
		wg.Go(func() {
			for i := c; ; i += 24 {
				select {
				case <-stop:
					return
				default:
				}
				status, _, _, err := send(client, h.urls[i%3], chatBody(i, i%2 == 0))
				switch {
				case err == nil && status == 200:
					served.Add(1)
				case err == nil && status == 503:
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
				default:
					t.Errorf("request %d: %d %v", i, status, err)
					return
				}
			}
		})
	}
	stream := "tg:{acme}:ledger"
	// Each phase lasts until the load has shown it, not for a guessed time.
	more := func(what string, n *atomic.Int64, by int64) {
		t.Helper()
		from := n.Load()
		if !testkit.WaitFor(20*time.Second, func() bool { return n.Load() >= from+by }) {
			t.Fatalf("%s: %d requests in 20 s, want %d", what, n.Load()-from, by)
		}
	}
	more("before PostgreSQL goes", &served, 20)
	db.Block()
	var backlog int64
	if !testkit.WaitFor(20*time.Second, func() bool {
		var err error
		backlog, err = h.rdb.XLen(ctx, stream).Result()
		return err == nil && backlog > 0
	}) {
		t.Fatalf("with PostgreSQL down the stream holds %d entries: want the settlements waiting there", backlog)
	}
	more("with PostgreSQL down", &served, 20)
	srv.Kill()
	more("with Redis killed", &refused, 5)
	srv.Restart()
	more("with Redis back", &served, 20)
	db.Unblock()
	more("with PostgreSQL back", &served, 20)
	close(stop)
	wg.Wait()

	reported := h.reportedCost("test-model")
	var rows, sum, servedRows int64
	spent, pending := h.redisSpent()
	conn := db.Conn()
	testkit.WaitFor(30*time.Second, func() bool {
		spent, pending = h.redisSpent()
		err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(usd_micros), 0), count(*) FILTER (WHERE served) FROM tollgate_ledger`).Scan(&rows, &sum, &servedRows)
		left, lerr := h.rdb.XLen(ctx, stream).Result()
		return err == nil && lerr == nil && left == 0 && sum == reported && spent == reported && pending == 0 && servedRows == h.upCalls.Load()
	})
	if left, _ := h.rdb.XLen(ctx, stream).Result(); left != 0 {
		t.Errorf("%d entries still in the stream", left)
	}
	if sum != reported || spent != reported || pending != 0 {
		t.Fatalf("ledger %d µ$ in %d rows, Redis spent %d (pending %d), upstream reported %d", sum, rows, spent, pending, reported)
	}
	if servedRows != h.upCalls.Load() || servedRows != served.Load() {
		t.Fatalf("%d served rows for %d upstream calls and %d answers", servedRows, h.upCalls.Load(), served.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no request was refused: Redis was never seen down")
	}
	// Reports read PostgreSQL: JSON and CSV agree with the table.
	month := time.Now().UTC().Format("2006-01")
	status, body := adminCall(t, "GET", h.urls[1]+"/admin/v1/reports?month="+month+"&by=team,model", financeToken, "")
	var rep struct {
		Rows []struct {
			Requests  int64 `json:"requests"`
			USDMicros int64 `json:"usd_micros"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &rep); status != 200 || err != nil || len(rep.Rows) != 1 ||
		rep.Rows[0].USDMicros != sum || rep.Rows[0].Requests != servedRows {
		t.Fatalf("report: %d %s, want %d requests, %d µ$", status, body, servedRows, sum)
	}
	status, csvBody := adminCall(t, "GET", h.urls[2]+"/admin/v1/reports?month="+month+"&by=team,model&format=csv", financeToken, "")
	if status != 200 || !strings.Contains(csvBody, fmt.Sprintf(",%d,", sum)) {
		t.Fatalf("CSV report: %d %s", status, csvBody)
	}
	// The ledger's own metrics: the backlog (drained), and what each
	// instance moved (at least once: together at least every row).
	var moved float64
	for _, u := range h.urls {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "\ntollgate_ledger_backlog 0\n") {
			t.Fatalf("%s/metrics has no drained ledger backlog", u)
		}
		var n float64
		if _, err := fmt.Sscanf(string(body[strings.Index(string(body), "\ntollgate_ledger_entries_stored_total ")+1:]), "tollgate_ledger_entries_stored_total %g", &n); err != nil {
			t.Fatalf("%s/metrics: tollgate_ledger_entries_stored_total: %v", u, err)
		}
		moved += n
	}
	if moved < float64(rows) {
		t.Fatalf("the instances say they moved %v entries, the table holds %d", moved, rows)
	}
	t.Logf("%d served, %d refused while Redis was down, peak backlog %d; ledger %d rows = %d µ$ = Redis spent = upstream reported",
		served.Load(), refused.Load(), backlog, rows, sum)
}

package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/ledger"
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

// Two instances on one Redis keep one ledger, PostgreSQL, and report it
// alike. A request held at the upstream past its lease is swept by the
// other instance (an expired entry, charged its reservation, written by
// that instance's sweep) and then settles late on its own (a corrected
// entry, actual − reserved): both reach the table through the Redis
// streams, so every instance's report reads what the upstream billed —
// not the correction alone, not one instance's share. Each instance also
// keeps a ledger_path file: a local copy, which reports do not read (the
// files together miss the sweep, which is why a file alone is refused
// beside Redis).
func TestOneLedgerForEveryInstanceThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	db := pgtest.New(t)
	hd := newHolder(t)
	dir := t.TempDir()
	h := startWith(t, setup{
		teamLimits: monthlyTen,
		sim:        simulated.Options{Before: hd.before},
		// Exact reservations: the other instance sweeps the reservation
		// record in Redis (a leased one is swept by its own instance).
		redisAddr: srv.Addr, instances: 2, spoolDir: dir, pgDSN: db.DSN, redisExtra: "    exact: true\n",
		topExtra: "lease: 1s\nledger_path: ${LEDGER}\n" +
			"admin_tokens: [{name: cfo, hash: \"" + policy.HashKey(financeToken) + "\", role: finance}]\n",
	})
	late := hd.hold(t, func() error {
		status, _, body, err := send(http.DefaultClient, h.urls[0], `{"model":"test-model","max_tokens":800,"messages":[{"role":"user","content":"HOLD on"}]}`)
		if err == nil && status != 200 {
			err = fmt.Errorf("%d %s", status, body)
		}
		return err
	})
	swept := 0
	if !testkit.WaitFor(10*time.Second, func() bool {
		n, err := h.apps[1].Engine().Store().Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		return swept > 0
	}) {
		t.Fatal("the other instance swept nothing in 10 s")
	}
	hd.free()
	if err := <-late; err != nil {
		t.Fatalf("the late request: %v", err)
	}
	// files reads the instances' ledger files: their entries, in order.
	files := func() (entries []budget.Entry) {
		for i := range h.apps {
			_ = ledger.Read(filepath.Join(dir, fmt.Sprintf("ledger-%d.jsonl", i)), func(e budget.Entry) error { entries = append(entries, e); return nil })
		}
		return entries
	}
	// The client has its answer before the gateway settles.
	testkit.WaitFor(5*time.Second, func() bool { return len(files()) > 0 })
	entries := files()
	if len(entries) != 1 || entries[0].Outcome != "corrected" {
		t.Fatalf("the ledger files hold %+v, want the late settlement's correction of the sweep", entries)
	}
	e := entries[0]

	// table waits (up to 20 s) for the streams to be moved and the table
	// to hold what the upstream billed, and returns the table's rows and
	// total.
	conn := db.Conn()
	table := func() (rows, sum int64) {
		t.Helper()
		testkit.WaitFor(20*time.Second, func() bool {
			left, lerr := h.rdb.XLen(ctx, "tg:{acme}:ledger").Result()
			err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(usd_micros), 0) FROM tollgate_ledger`).Scan(&rows, &sum)
			return lerr == nil && err == nil && left == 0 && sum == h.reportedCost("test-model")
		})
		return rows, sum
	}
	month := time.Now().UTC().Format("2006-01")
	// reported is an instance's report of the month, in µ$.
	reported := func(url string) (usd int64) {
		t.Helper()
		status, body := adminCall(t, "GET", url+"/admin/v1/reports?month="+month+"&by=team", financeToken, "")
		var rep struct {
			Rows []struct {
				USDMicros int64 `json:"usd_micros"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(body), &rep); status != 200 || err != nil {
			t.Fatalf("report from %s: %d %s %v", url, status, body, err)
		}
		for _, r := range rep.Rows {
			usd += r.USDMicros
		}
		return usd
	}
	billed := h.reportedCost("test-model")
	if rows, sum := table(); rows != 2 || sum != billed {
		t.Fatalf("the table holds %d rows, %d µ$; the upstream billed %d µ$ for the one request (want its expired entry and its correction)", rows, sum, billed)
	}
	var outcomes []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(outcome ORDER BY id) FROM tollgate_ledger WHERE id LIKE $1`, e.ReservationID+"%").Scan(&outcomes); err != nil ||
		!slices.Equal(outcomes, []string{"expired", "corrected"}) {
		t.Fatalf("the request's rows: %v %v, want the sweep's expired entry and the late correction", outcomes, err)
	}
	for i, u := range h.urls {
		if usd := reported(u); usd != billed {
			t.Errorf("instance %d reports %d µ$ for the late request; the upstream billed %d (its correction alone is %d)", i, usd, billed, e.Cost)
		}
	}

	// Ordinary requests through both instances: the same total everywhere,
	// what the upstream billed for all of them.
	const more = 6
	for i := range more {
		if status, _, body, err := send(http.DefaultClient, h.urls[i%2], chatBody(i, i%2 == 0)); err != nil || status != 200 {
			t.Fatalf("request %d: %d %s %v", i, status, body, err)
		}
	}
	billed = h.reportedCost("test-model")
	if rows, sum := table(); rows != 2+more || sum != billed {
		t.Fatalf("the table holds %d rows, %d µ$; the upstream billed %d µ$ in %d requests", rows, sum, billed, 1+more)
	}
	for i, u := range h.urls {
		if usd := reported(u); usd != billed {
			t.Errorf("instance %d reports %d µ$; the upstream billed %d", i, usd, billed)
		}
	}

	// The files: each instance's own settlements, the sweep in neither.
	testkit.WaitFor(5*time.Second, func() bool { return len(files()) == 1+more })
	var sum int64
	entries = files()
	for _, x := range entries {
		sum += int64(x.Cost)
	}
	if len(entries) != 1+more || sum != billed-int64(e.Reserved) {
		t.Fatalf("the files hold %d entries, %d µ$; want %d, %d (billed %d less the sweep's %d)", len(entries), sum, 1+more, billed-int64(e.Reserved), billed, e.Reserved)
	}
}

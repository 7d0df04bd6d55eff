package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// reseedConfig has a budget of every kind the ledger can rebuild — usd,
// tokens and weighted requests, at org, team, key, user and model scope,
// on a Tokyo calendar — and one it cannot (split by client IP). The
// ledger is PostgreSQL; the file is the instance's local copy.
const reseedConfig = `
store: {kind: redis, redis: {addrs: ["${REDIS}"]}}
ledger_postgres: "${PG}"
ledger_path: "${LEDGER}"
route_costs: {/v1/chat/completions: 3}
upstreams: [{name: sim, base_url: "${UPSTREAM}", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 50}}
orgs:
  - id: acme
    time_zone: Asia/Tokyo
    limits: [{name: req-month, kind: budget, unit: requests, amount: 1000000, period: month}]
    teams:
      - id: ml
        limits:
          - {name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}
          - {name: usd-day-ip, kind: budget, unit: usd, amount: "$100", period: day, key_by: [ip]}
        user_limits: [{name: user-usd, kind: budget, unit: usd, amount: "$10", period: day}]
        model_limits: {m: [{name: m-tokens, kind: budget, unit: tokens, amount: 100000000, period: month}]}
        keys:
          - id: k1
            hash: "${KEY_HASH}"
            limits: [{name: key-tokens, kind: budget, unit: tokens, amount: 100000000, period: day}]
`

// counters reads every budget counter of acme: key → spent.
func counters(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "tg:{acme}:c:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		v, err := rdb.HGet(context.Background(), k, "spent").Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// Redis loses the budget counters; `tollgate ledger reseed` rebuilds every
// one of them from the PostgreSQL ledger and the entries still in the Redis
// stream (not from the instance's ledger file), to the unit, and running it
// again changes nothing.
func TestLedgerReseed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	db := pgtest.New(t)
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	localCopy := filepath.Join(t.TempDir(), "ledger.jsonl")
	vars := map[string]string{"REDIS": srv.Addr, "PG": db.DSN, "UPSTREAM": up.URL + "/v1", "KEY_HASH": policy.HashKey("tg-k1"), "LEDGER": localCopy}
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	src := reseedConfig
	for k, v := range vars {
		src = strings.ReplaceAll(src, "${"+k+"}", v)
	}
	if err := os.WriteFile(cfgPath, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := a.Background(ctx)
	gw := httptest.NewServer(a.Handler())
	send := func(i int) {
		body := fmt.Sprintf(`{"model":"m","stream":%v,"user":"u%d","messages":[{"role":"user","content":"reseed %d %s"}]}`,
			i%2 == 0, i%3, i, strings.Repeat("x ", i))
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tg-k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	stream := "tg:{acme}:ledger"
	waitStream := func(want int64) {
		var n int64
		if testkit.WaitFor(10*time.Second, func() bool {
			n, _ = rdb.XLen(context.Background(), stream).Result()
			return n == want
		}) {
			return
		}
		t.Fatalf("the ledger stream holds %d entries, want %d", n, want)
	}
	for i := range 30 {
		send(i)
	}
	// All in PostgreSQL. (With budget leases an entry reaches the stream
	// at the next flush: an empty stream alone could be one between two.)
	if !testkit.WaitFor(10*time.Second, func() bool {
		var rows int
		err := db.Conn().QueryRow(context.Background(), "SELECT count(*) FROM tollgate_ledger").Scan(&rows)
		return err == nil && rows == 30
	}) {
		t.Fatal("the first 30 entries did not reach PostgreSQL")
	}
	waitStream(0)
	// PostgreSQL away: these wait in the stream; then the gateway stops.
	db.Block()
	for i := 30; i < 40; i++ {
		send(i)
	}
	waitStream(10)
	gw.Close()
	stop()
	cancel()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	db.Unblock()

	want := counters(t, rdb)
	// Redis loses every counter (the stream survives), and the instance
	// its local copy of the ledger: on Redis the reseed reads PostgreSQL,
	// the one ledger of every instance, not one instance's file.
	for k := range want {
		rdb.Del(context.Background(), k)
	}
	if err := os.Truncate(localCopy, 0); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"ledger", "reseed", "--config", cfgPath, "--dry-run"}, &out, &errOut); code != 0 {
		t.Fatalf("reseed --dry-run: %d %s", code, errOut.String())
	}
	if got := counters(t, rdb); len(got) != 0 {
		t.Fatalf("a dry run wrote counters: %v", got)
	}
	if !strings.Contains(out.String(), "40 ledger entries (10 still in Redis streams); would raise (dry run)") {
		t.Fatalf("dry run:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"ledger", "reseed", "--config", cfgPath, "--format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("reseed: %d %s", code, errOut.String())
	}
	var rep app.ReseedReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := counters(t, rdb)
	// The per-IP budget cannot come back: the ledger keeps no addresses.
	for k := range want {
		if strings.Contains(k, "|ip=") {
			delete(want, k)
			if rep.Skipped[strings.SplitN(strings.TrimPrefix(k, "tg:{acme}:c:"), "|", 2)[0]] != 40 {
				t.Errorf("the per-IP budget is not reported skipped 40 times: %v", rep.Skipped)
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("rebuilt counters differ:\n got %v\nwant %v\nreport %+v", got, want, rep)
	}
	// Spot-check units: requests weigh 3 each; tokens and µ$ are non-zero.
	for k, v := range got {
		n, _ := strconv.ParseInt(v, 10, 64)
		if strings.Contains(k, "req-month") && n != 120 || n <= 0 {
			t.Errorf("%s = %s", k, v)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d budgets rebuilt, want 9 (org, team, key, model, 3 users, the key × model spend meters for the day and month): %v", len(got), got)
	}
	// Again: nothing to raise.
	out.Reset()
	if code := run(context.Background(), []string{"ledger", "reseed", "--config", cfgPath}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "raised 0 of 9 budgets") {
		t.Fatalf("second reseed: %d\n%s%s", code, out.String(), errOut.String())
	}
	if again := counters(t, rdb); !maps.Equal(again, got) {
		t.Fatalf("a second reseed changed counters: %v", again)
	}
}

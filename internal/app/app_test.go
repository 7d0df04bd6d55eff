package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/jsonlog"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const cfgYAML = `
store:
  snapshot_path: ${SNAP}
upstreams: [{name: sim, base_url: "${UP}", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 100}}
orgs: [{id: o, teams: [{id: t, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$1", period: month}],
        keys: [{id: k, hash: "${HASH}"}]}]}]
`

// simUpstream starts a simulated upstream for the test and returns its
// API root.
func simUpstream(t *testing.T) string {
	t.Helper()
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	return up.URL + "/v1"
}

// chat sends n chat requests with the key tg-k, each different, and
// fails the test unless each is served.
func chat(t *testing.T, url string, n int) {
	t.Helper()
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi %d"}]}`, i)))
		req.Header.Set("Authorization", "Bearer tg-k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
}

// A gateway that shuts down writes its state; the next one starts from it.
func TestShutdownSnapshotsAndRestartResumes(t *testing.T) {
	vars := map[string]string{"SNAP": filepath.Join(t.TempDir(), "state.json"), "UP": simUpstream(t), "HASH": policy.HashKey("tg-k")}
	cfg := apptest.Config(t, cfgYAML, vars)
	bucket, period := "team:o/t:usd-month", budget.PeriodID(budget.Month, time.Now(), nil)

	a := serve(t, cfg, func(url string) { chat(t, url, 1) })
	spent, _ := a.Store().Spent(bucket, period)
	if spent == 0 {
		t.Fatal("nothing was spent")
	}
	b := serve(t, cfg, func(string) {})
	if again, pending := b.Store().Spent(bucket, period); again != spent || pending != 0 {
		t.Fatalf("after restart spent %d pending %d, want %d and 0", again, pending, spent)
	}
}

// serve runs an app until use returns, then shuts it down.
func serve(t *testing.T, cfg *config.Config, use func(url string)) *app.App {
	t.Helper()
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := apptest.Run(t, a)
	use("http://" + addr)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	return a
}

// A reload with a broken file keeps the running config; a good one applies
// its limits to the next request.
func TestReload(t *testing.T) {
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.yaml")
	write := func(s string) {
		s = strings.ReplaceAll(s, "${UP}", up.URL+"/v1")
		s = strings.ReplaceAll(s, "${HASH}", policy.HashKey("tg-k"))
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	withRPM := func(n string) string {
		return strings.Replace(strings.Replace(cfgYAML, "store:\n  snapshot_path: ${SNAP}\n", "", 1),
			`limits: [{name: usd-month, kind: budget, unit: usd, amount: "$1", period: month}]`,
			`limits: [{name: rpm, kind: rate, unit: requests, amount: `+n+`, window: 1m}]`, 1)
	}
	write(withRPM("1"))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, cfg, func(url string) {}) // the wiring starts and stops cleanly
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	gw := httptest.NewServer(a.Handler())
	defer gw.Close()
	status := func() int {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer tg-k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s1, s2 := status(), status(); s1 != 200 || s2 != 429 {
		t.Fatalf("under 1 rpm: %d %d", s1, s2)
	}
	write("upstreams: [{name: sim, base_url: nope}]\n") // broken
	if err := a.Reload(path); err == nil || !strings.Contains(err.Error(), "base_url") {
		t.Fatalf("a broken file was accepted: %v", err)
	}
	if s := status(); s != 429 {
		t.Fatalf("after a refused reload: %d, want the old limit's 429", s)
	}
	write(withRPM("100"))
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != 200 {
		t.Fatalf("after reloading 100 rpm: %d", s)
	}
}

// SIGTERM (here: the serve context ending) during 50 streams: every stream
// completes, every reservation is settled, and the ledger equals the
// upstream's reported usage.
func TestShutdownFinishesStreams(t *testing.T) {
	sim, err := simulated.New(simulated.Options{ChunkDelay: 10 * time.Millisecond, ReplyTokens: func(uint64) int64 { return 60 }})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	vars := map[string]string{"SNAP": filepath.Join(t.TempDir(), "state.json"), "UP": up.URL + "/v1", "HASH": policy.HashKey("tg-k")}
	cfg := apptest.Config(t, cfgYAML, vars)
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := apptest.Run(t, a)
	url := "http://" + addr

	started := make(chan struct{}, 50)
	var wg sync.WaitGroup
	var complete atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range 50 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"stream %d"}]}`, i)
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer tg-k")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			started <- struct{}{}
			all, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
				t.Errorf("stream %d: status %d err %v, ends %q", i, resp.StatusCode, err, tail(all))
				return
			}
			complete.Add(1)
		})
	}
	for range 50 {
		<-started // every stream has its headers: it is in flight
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }() // what SIGTERM does in `tollgate serve`
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if complete.Load() != 50 {
		t.Fatalf("%d of 50 streams completed", complete.Load())
	}
	if n := a.Store().Open(); n != 0 {
		t.Fatalf("%d reservations left open after shutdown", n)
	}
	u := sim.Stats().Usage["m"]
	spent, pending := a.Store().Spent("team:o/t:usd-month", budget.PeriodID(budget.Month, time.Now(), nil))
	if want := u.PromptTokens + 2*u.CompletionTokens; spent != want || pending != 0 || u.Requests != 50 {
		t.Fatalf("spent %d pending %d; the upstream reported %d requests worth %d µ$", spent, pending, u.Requests, want)
	}
	client.CloseIdleConnections()
}

// A stream still running past the drain budget does not hold shutdown for
// its upstream's timeout: its exchange is ended, charged its reservation
// (abandoned: shutdown), and settled before the store closes.
func TestShutdownEndsExchangesPastTheDrainBudget(t *testing.T) {
	sim, err := simulated.New(simulated.Options{Fault: simulated.Stall, ReplyTokens: func(uint64) int64 { return 60 }})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	vars := map[string]string{"SNAP": filepath.Join(t.TempDir(), "state.json"), "UP": up.URL + "/v1", "HASH": policy.HashKey("tg-k")}
	cfg := apptest.Config(t, "server: {drain_timeout: 300ms}\n"+cfgYAML, vars)
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var entries []budget.Entry
	a.Gateway().OnSettle(func(e budget.Entry) { mu.Lock(); entries = append(entries, e); mu.Unlock() })
	addr, stop := apptest.Run(t, a)
	const n = 3
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"stream %d"}]}`, i)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer tg-k")
			resp, err := http.DefaultClient.Do(req)
			started <- struct{}{}
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body) // until the gateway ends it
			resp.Body.Close()
		})
	}
	for range n {
		<-started
	}
	// The upstream's timeout is ten minutes: stop returns long before.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if open := a.Store().Open(); open != 0 {
		t.Fatalf("%d reservations left open after shutdown", open)
	}
	mu.Lock()
	defer mu.Unlock()
	var charged int64
	for _, e := range entries {
		if e.Abandoned != "shutdown" || e.Settlement != "reservation" || e.Cost != e.Reserved {
			t.Fatalf("entry %+v: want the reservation, abandoned at shutdown", e)
		}
		charged += int64(e.Cost)
	}
	spent, pending := a.Store().Spent("team:o/t:usd-month", budget.PeriodID(budget.Month, time.Now(), nil))
	if len(entries) != n || spent != charged || pending != 0 {
		t.Fatalf("%d entries charging %d; spent %d pending %d", len(entries), charged, spent, pending)
	}
}

func tail(b []byte) string {
	if len(b) > 40 {
		b = b[len(b)-40:]
	}
	return string(b)
}

// One JSON line per request with what an operator needs, and never the API
// key or the prompt — through slog's JSON handler, and through the one
// `serve --log-format json` uses, which the gateway writes lines to
// without a record.
func TestRequestLogLines(t *testing.T) {
	for name, handler := range map[string]func(io.Writer) slog.Handler{
		"slog":    func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
		"jsonlog": func(w io.Writer) slog.Handler { return jsonlog.New(w) },
	} {
		t.Run(name, func(t *testing.T) { testRequestLogLines(t, handler) })
	}
}

func testRequestLogLines(t *testing.T, handler func(io.Writer) slog.Handler) {
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	vars := map[string]string{"SNAP": filepath.Join(t.TempDir(), "state.json"), "UP": up.URL + "/v1", "HASH": policy.HashKey("tg-secret-key-123")}
	cfg := apptest.Config(t, cfgYAML, vars)
	var logs syncBuffer
	a, err := app.New(cfg, slog.New(handler(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	gw := httptest.NewServer(a.Handler())
	defer gw.Close()
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"PROMPT-TEXT-NOT-FOR-LOGS"}]}`,
		`{"model":"m","max_tokens":1000000,"messages":[{"role":"user","content":"PROMPT-TEXT-NOT-FOR-LOGS"}]}`, // refused: above the model's maximum
	} {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tg-secret-key-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	out := logs.String()
	for _, secret := range []string{"tg-secret-key-123", "PROMPT-TEXT-NOT-FOR-LOGS"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log contains %q:\n%s", secret, out)
		}
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no request line in:\n%s", out)
	}
	for _, k := range []string{"request_id", "org", "team", "key", "model", "reservation", "outcome", "estimate_usd_micros", "actual_usd_micros", "input_tokens", "output_tokens", "usage_estimated"} {
		if _, ok := line[k]; !ok {
			t.Errorf("request line lacks %s: %v", k, line)
		}
	}
	if line["key"] != "k" || line["team"] != "t" || line["outcome"] != "settled" {
		t.Errorf("request line %v", line)
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The embedded store loses its snapshot; a reseed from the ledger file
// gives back the team budget and the spend meters, to the µ$, and the
// restarted gateway enforces them.
func TestReseedFromTheLedgerFile(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "state.json")
	vars := map[string]string{"SNAP": snap, "UP": simUpstream(t), "HASH": policy.HashKey("tg-k")}
	cfg := apptest.Config(t, "ledger_path: "+filepath.Join(dir, "ledger.jsonl")+"\n"+cfgYAML, vars)
	bucket, period := "team:o/t:usd-month", budget.PeriodID(budget.Month, time.Now(), nil)
	meter := "spend:o/t/k/m:spend-month"
	a := serve(t, cfg, func(url string) { chat(t, url, 5) })
	spent, _ := a.Store().Spent(bucket, period)
	metered, _ := a.Store().Spent(meter, period)
	if spent == 0 || metered != spent {
		t.Fatalf("spent %d, metered %d", spent, metered)
	}
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	b, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lost, _ := b.Store().Spent(bucket, period); lost != 0 {
		t.Fatalf("without the snapshot the budget still holds %d", lost)
	}
	rep, err := b.Reseed(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Store().Spent(bucket, period); got != spent || rep.Entries != 5 {
		t.Fatalf("after the reseed %d of %d µ$ (%+v)", got, spent, rep)
	}
	if got, _ := b.Store().Spent(meter, period); got != spent {
		t.Fatalf("meter after the reseed: %d, want %d", got, spent)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// The embedded store's ledger file is shipped to PostgreSQL: entries made
// while PostgreSQL is away follow when it returns, a restart resumes where
// shipping stopped, and the table ends equal to the file — each entry
// once, to the µ$.
func TestEmbeddedLedgerShippedToPostgres(t *testing.T) {
	db := pgtest.New(t)
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.jsonl")
	vars := map[string]string{"SNAP": filepath.Join(dir, "state.json"), "UP": simUpstream(t), "HASH": policy.HashKey("tg-k"), "PG": db.DSN}
	cfg := apptest.Config(t, "ledger_path: "+ledgerPath+"\nledger_postgres: ${PG}\n"+cfgYAML, vars)
	conn := db.Conn()
	table := func() (rows, sum int64) {
		t.Helper()
		err := conn.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(usd_micros), 0) FROM tollgate_ledger").Scan(&rows, &sum)
		if err != nil && strings.Contains(err.Error(), "42P01") {
			return 0, 0 // nothing shipped yet: the table comes with the first entries
		}
		if err != nil {
			t.Fatal(err)
		}
		return rows, sum
	}
	waitRows := func(n int64) {
		t.Helper()
		var rows int64
		if testkit.WaitFor(10*time.Second, func() bool { rows, _ = table(); return rows == n }) {
			return
		}
		t.Fatalf("the table holds %d rows, want %d", rows, n)
	}
	serve(t, cfg, func(url string) {
		chat(t, url, 4)
		waitRows(4)
		db.Block()
		chat(t, url, 3) // on disk in the file, waiting for PostgreSQL
	})
	db.Unblock()
	conn = db.Conn()
	if rows, _ := table(); rows != 4 {
		t.Fatalf("with PostgreSQL away %d rows were shipped, want the 4 from before", rows)
	}
	// The next start ships the rest, once.
	serve(t, cfg, func(url string) {
		waitRows(7)
		chat(t, url, 2)
		waitRows(9)
	})
	var fileSum int64
	n := 0
	if err := ledger.Read(ledgerPath, func(e budget.Entry) error { n++; fileSum += int64(e.Cost); return nil }); err != nil {
		t.Fatal(err)
	}
	if rows, sum := table(); rows != int64(n) || sum != fileSum || n != 9 {
		t.Fatalf("table %d rows %d µ$, file %d entries %d µ$", rows, sum, n, fileSum)
	}
}

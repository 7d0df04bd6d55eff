package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// redisSpent reads the ml team's month budget from Redis, once pending
// settlements have landed (up to 5 s).
func (h *harness) redisSpent() (spent, pending int64) {
	h.t.Helper()
	key := "tg:{acme}:c:" + teamMonth + ":" + budget.PeriodID(budget.Month, time.Now(), nil)
	testkit.WaitFor(5*time.Second, func() bool {
		spent, pending = h.readRedis(key)
		return pending == 0
	})
	return spent, pending
}

// settledAsReported waits (up to 10 s) until the team's month budget in
// Redis holds exactly what the upstream reported for model and nothing
// pending — leased spend lands at the next flush — and returns the three.
func (h *harness) settledAsReported(model string) (spent, pending, reported int64) {
	testkit.WaitFor(10*time.Second, func() bool {
		spent, pending = h.redisSpent()
		reported = h.reportedCost(model)
		return spent == reported && pending == 0
	})
	return spent, pending, reported
}

func (h *harness) readRedis(key string) (spent, pending int64) {
	v, err := h.rdb.HMGet(ctx, key, "spent", "pending").Result()
	if err != nil {
		h.t.Fatal(err)
	}
	if s, ok := v[0].(string); ok {
		spent, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := v[1].(string); ok {
		pending, _ = strconv.ParseInt(s, 10, 64)
	}
	return spent, pending
}

func send(client *http.Client, url, body string) (int, http.Header, string, error) {
	return sendAs(client, url, testKey, body)
}

// sendAs posts a chat body to url with key.
func sendAs(client *http.Client, url, key, body string) (int, http.Header, string, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

func chatBody(i int, stream bool) string {
	return fmt.Sprintf(`{"model":"test-model","stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"request %d %s"}]}`,
		stream, 10+i%190, i, strings.Repeat("word ", i%40))
}

// Four gateway instances share one team budget through Redis; 64 clients
// each. Spend never passes the ceiling, not even for a moment, and ends
// equal to what the upstream reported, to the micro-dollar.
func TestInstancesShareOneBudgetThroughRedis(t *testing.T) {
	instancesShareOneBudget(t, "    exact: true\n")
}

// The same with budget leases (the default): requests admitted against
// slices leased from Redis, spend flushed in batches.
func TestInstancesShareOneBudgetThroughLeases(t *testing.T) {
	instancesShareOneBudget(t, "")
}

func instancesShareOneBudget(t *testing.T, redisExtra string) {
	srv := redistest.Start(t)
	const ceiling = 100_000 // µ$: $0.10 at $1/$2 per 1M tokens, a few hundred requests
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "` + strconv.Itoa(ceiling) + ` µ$", period: month}`,
		redisAddr:  srv.Addr, instances: 4, spoolDir: t.TempDir(), redisExtra: redisExtra,
	})
	key := "tg:{acme}:c:" + teamMonth + ":" + budget.PeriodID(budget.Month, time.Now(), nil)
	stop := make(chan struct{})
	var breach atomic.Value
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if spent, pending := h.readRedis(key); spent+pending > ceiling {
				breach.Store(fmt.Sprintf("spent %d + pending %d > %d", spent, pending, ceiling))
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			misses := 0
			for i := c; misses < 3 && i < c+64*40; i += 64 {
				status, _, body, err := send(client, h.urls[i%4], chatBody(i, i%3 == 0))
				switch {
				case err != nil:
					t.Error(err)
					return
				case status == 200:
					ok.Add(1)
					misses = 0
				case budgetRefused(status, body):
					refused.Add(1)
					misses++
				default:
					t.Errorf("status %d: %s", status, body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if b, _ := breach.Load().(string); b != "" {
		t.Fatal(b)
	}
	// Leased spend reaches Redis at the next flush, and idle slices go
	// back at the one after: wait for it, not for a fixed time.
	spent, pending, reported := h.settledAsReported("test-model")
	if spent != reported || pending != 0 {
		t.Fatalf("spent %d pending %d; the upstream reported usage worth %d", spent, pending, reported)
	}
	if refused.Load() == 0 {
		t.Fatalf("the ceiling was never reached (%d admitted)", ok.Load())
	}
	// Once everything settled, one request at a time tops the budget up:
	// the concurrent run left no more than one request's worth unused.
	smallest := chatBody(0, false) // 10 output tokens
	topUp := 0
	for {
		status, _, _, err := send(client, h.url, smallest)
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 {
			break
		}
		topUp++
	}
	calls, _ := h.rdb.Info(context.Background(), "commandstats").Result()
	_, evalsha, _ := strings.Cut(calls, "cmdstat_evalsha:calls=")
	evalsha, _, _ = strings.Cut(evalsha, ",")
	t.Logf("admitted %d concurrently (%d refused), then %d one at a time; spent %d of %d µ$; %s script calls", ok.Load(), refused.Load(), topUp, spent, ceiling, evalsha)
	if final, _ := h.redisSpent(); final > ceiling {
		t.Fatalf("spent %d > ceiling %d", final, ceiling)
	}
}

// Redis is killed under load: within a second every new request is refused
// with 503, Retry-After and budget_store_unavailable, and none reaches the
// upstream; settlements in flight are spooled and, once Redis is back (it
// keeps an append-only file), the ledger equals the upstream's reported usage.
func TestRedisKilledUnderLoad(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}`,
		sim:        simulated.Options{ChunkDelay: 2 * time.Millisecond},
		redisAddr:  srv.Addr, instances: 2, spoolDir: t.TempDir(),
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	killed := make(chan struct{})
	var wg sync.WaitGroup
	var served atomic.Int64
	for c := range 32 {
		wg.Go(func() {
			for i := c; ; i += 32 {
				select {
				case <-killed:
					return
				default:
				}
				status, _, _, err := send(client, h.urls[i%2], chatBody(i, i%2 == 0))
				if err == nil && status == 200 {
					served.Add(1)
				}
			}
		})
	}
	if !testkit.WaitFor(10*time.Second, func() bool { return served.Load() >= 20 }) {
		t.Fatalf("only %d requests served before the kill", served.Load())
	}
	srv.Kill()
	close(killed)
	wg.Wait()
	// Soon every instance refuses: slices are not trusted past a failed
	// lease call, and an exact reservation fails closed.
	if !testkit.WaitFor(10*time.Second, func() bool {
		for _, u := range h.urls[:2] {
			if status, _, _, err := send(client, u, chatBody(0, false)); err != nil || status != 503 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("an instance still serves with Redis killed")
	}
	upstreamBefore := h.upCalls.Load()
	for i := range 20 {
		status, hdr, body, err := send(client, h.urls[i%2], chatBody(i, false))
		if err != nil {
			t.Fatal(err)
		}
		var eb errorBody
		_ = json.Unmarshal([]byte(body), &eb)
		if status != 503 || eb.Error.Code != "budget_store_unavailable" || hdr.Get("Retry-After") == "" {
			t.Fatalf("with Redis down: %d %q Retry-After=%q", status, eb.Error.Code, hdr.Get("Retry-After"))
		}
	}
	if n := h.upCalls.Load() - upstreamBefore; n != 0 {
		t.Fatalf("%d unreserved requests reached the upstream", n)
	}
	resp, err := http.Get(h.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz with Redis down = %d", resp.StatusCode)
	}

	srv.Restart()
	spent, pending, reported := h.settledAsReported("test-model")
	if spent != reported || pending != 0 {
		t.Fatalf("after Redis came back: spent %d pending %d, the upstream reported %d (%d served)", spent, pending, reported, served.Load())
	}
	t.Logf("%d served before the kill; ledger %d µ$ equals reported usage", served.Load(), spent)
}

// With Redis down, each route does what it is configured to: chat fails
// closed, embeddings fail open, completions reserve from a local bucket with
// this instance's share (1/2) of each limit. Spend let through is charged
// to Redis when it is back.
func TestRoutesDegradeAsConfigured(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "2000 µ$", period: month}`,
		redisAddr:  srv.Addr, spoolDir: t.TempDir(),
		redisExtra: "    instances: 2\n    on_unavailable_routes:\n      /v1/embeddings: fail_open\n      /v1/completions: local_fallback\n",
	})
	post := func(path, body string) (int, string) {
		h.t.Helper()
		resp, eb := h.post(path, testKey, body, nil)
		return resp.StatusCode, eb.Error.Code
	}
	if status, _ := post("/v1/chat/completions", chatBody(1, false)); status != 200 {
		t.Fatalf("with Redis up: %d", status)
	}
	srv.Kill()
	if status, code := post("/v1/chat/completions", chatBody(2, false)); status != 503 || code != "budget_store_unavailable" {
		t.Fatalf("chat with Redis down: %d %s, want 503 (fail_closed)", status, code)
	}
	for range 3 {
		if status, _ := post("/v1/embeddings", `{"model":"text-embedding-3-small","input":"hello"}`); status != 200 {
			t.Fatalf("embeddings with Redis down: %d, want 200 (fail_open)", status)
		}
	}
	// completions: each reserves prompt + 2×16 µ$ (at $1.50/$2 per 1M, rounded up);
	// the local share of the 2000 µ$ ceiling is 1000: some pass, then 429.
	passed := 0
	for range 100 {
		status, code := post("/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"say something","max_tokens":100}`)
		if budgetRefused(status, code) {
			break
		}
		if status != 200 {
			t.Fatalf("completions with Redis down: %d %s", status, code)
		}
		passed++
	}
	if passed == 0 || passed == 100 {
		t.Fatalf("local fallback admitted %d", passed)
	}
	g := h.app.Gateway()
	if g.Degraded("fail_open") != 3 || g.Degraded("local_fallback") != int64(passed) {
		t.Fatalf("counted fail_open=%d local_fallback=%d, want 3 and %d", g.Degraded("fail_open"), g.Degraded("local_fallback"), passed)
	}
	srv.Restart()
	upstream := h.sim.Stats().Usage
	var want int64
	for model, u := range upstream {
		p := map[string][2]int64{"test-model": {1_000_000, 2_000_000}, "text-embedding-3-small": {20_000, 0}, "gpt-3.5-turbo-instruct": {1_500_000, 2_000_000}}[model]
		// Every request of a model here has the same usage: price one and multiply.
		want += u.Requests * (ceilDiv(u.PromptTokens/u.Requests*p[0], 1_000_000) + ceilDiv(u.CompletionTokens/u.Requests*p[1], 1_000_000))
	}
	var spent, pending int64
	testkit.WaitFor(5*time.Second, func() bool {
		spent, pending = h.redisSpent()
		return spent == want
	})
	if spent != want || pending != 0 {
		t.Fatalf("after Redis came back: spent %d pending %d, want %d (everything served, degraded or not)", spent, pending, want)
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Three instances send as fast as they can through one upstream limited to
// 40 requests a second: together they keep to it. Over ten seconds of
// steady state the upstream gets the rate within 5 % (a load-independent
// count: the pacer hands out slots on Redis's clock); a single second may
// see more when a busy machine delivers late a few requests whose slots
// fell in the second before, so it is held to the rate plus a quarter.
func TestDistributedPacing(t *testing.T) {
	const rate = 40
	srv := redistest.Start(t)
	h := startWith(t, setup{
		teamLimits: monthlyTen,
		redisAddr:  srv.Addr, instances: 3, spoolDir: t.TempDir(),
		upstreamExtra: "    queue: {rate: 40, max_length: 1000, max_wait: 2s}\n",
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	stop := time.Now().Add(11500 * time.Millisecond)
	var wg sync.WaitGroup
	for c := range 3 * 12 {
		wg.Go(func() {
			for i := c; time.Now().Before(stop); i += 36 {
				if _, _, _, err := send(client, h.urls[c%3], chatBody(i, false)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	h.upMu.Lock()
	times := append([]time.Time(nil), h.upTimes...)
	h.upMu.Unlock()
	if len(times) == 0 {
		t.Fatal("nothing reached the upstream")
	}
	// Ten whole seconds of steady state, after the first.
	from := times[0].Add(time.Second)
	counts := make([]int, 10)
	for _, at := range times {
		if k := int(at.Sub(from) / time.Second); at.After(from) && k < 10 {
			counts[k]++
		}
	}
	t.Logf("upstream requests per second: %v", counts)
	total := 0
	for k, n := range counts {
		total += n
		if n > rate*125/100 {
			t.Fatalf("second %d saw %d requests, want at most %d (all: %v)", k, n, rate*125/100, counts)
		}
	}
	if total < 10*rate*95/100 || total > 10*rate*105/100 {
		t.Fatalf("ten seconds saw %d requests, want %d ± 5%% (per second: %v)", total, 10*rate, counts)
	}
}

// Four instances push one team past 50 % and 80 % of its budget at once:
// each threshold sends exactly one webhook.
func TestThresholdAlertsFireOnceAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	got := map[int64]int{}
	blocked := 0 // "blocked" alerts: what is left fits no request (once a period too)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a struct {
			Kind      string `json:"kind"`
			Text      string `json:"text"`
			Threshold int64  `json:"threshold_percent"`
			Team      string `json:"team"`
		}
		_ = json.NewDecoder(r.Body).Decode(&a)
		if a.Text == "" || a.Team != "ml" {
			t.Errorf("webhook body %+v", a)
		}
		mu.Lock()
		if a.Kind == "blocked" {
			blocked++
		} else {
			got[a.Threshold]++
		}
		mu.Unlock()
	}))
	defer hook.Close()
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "8000 µ$", period: month}`,
		redisAddr:  srv.Addr, instances: 4, spoolDir: t.TempDir(),
		topExtra: "alerts: {webhooks: [\"" + hook.URL + "\"]}\nadmin_tokens: [{name: cfo, hash: \"" + policy.HashKey(financeToken) + "\", role: finance}]\n",
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	load := func() {
		var wg sync.WaitGroup
		for c := range 32 {
			wg.Go(func() {
				for i := c; i < 32*6; i += 32 {
					body := `{"model":"test-model","max_tokens":20,"messages":[{"role":"user","content":"r` + strconv.Itoa(i) + `"}]}`
					if _, _, _, err := send(client, h.urls[i%4], body); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	// claimed is how many alerts the instances claimed, by threshold:
	// each claim sends one webhook.
	claimed := func() map[int64]int {
		out := map[int64]int{}
		for _, a := range h.apps {
			fams, err := a.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fams {
				if f.GetName() != "tollgate_budget_alerts_total" {
					continue
				}
				for _, m := range f.Metric {
					for _, l := range m.Label {
						if th, err := strconv.ParseInt(l.GetValue(), 10, 64); l.GetName() == "threshold" && err == nil {
							out[th] += int(m.GetCounter().GetValue())
						}
					}
				}
			}
		}
		return out
	}
	// want waits for every settlement of the load (an alert is claimed at
	// a reservation or a settlement), then for the webhook of every claim:
	// no other can come after. Exactly n at 50 and 80 %.
	want := func(n int) {
		t.Helper()
		if !testkit.WaitFor(10*time.Second, func() bool {
			for _, a := range h.apps {
				if a.Gateway().Settling() != 0 {
					return false
				}
			}
			return true
		}) {
			t.Fatal("settlements still under way after 10 s")
		}
		claims := claimed()
		testkit.WaitFor(10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return maps.Equal(got, claims)
		})
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(got, claims) {
			t.Fatalf("webhooks by threshold %v, claims %v", got, claims)
		}
		if got[50] != n || got[80] != n {
			t.Fatalf("webhooks by threshold: %v, want exactly %d each for 50 and 80", got, n)
		}
		for th, k := range got {
			if k > n { // 100 % is reached or not, depending on the run; never twice a period
				t.Fatalf("threshold %d sent %d webhooks, want at most %d", th, k, n)
			}
		}
		if blocked > n {
			t.Fatalf("%d blocked alerts, want at most one a period", blocked)
		}
	}
	load()
	want(1)
	// Finance starts the month over: as spend climbs again, each threshold
	// fires once more, still once across the four instances.
	if status, body := adminCall(t, "POST", h.urls[2]+"/admin/v1/ceilings/reset", financeToken, `{"org":"acme","team":"ml","name":"usd-month","confirm":true,"reason":"test"}`); status != 200 {
		t.Fatalf("reset: %d %s", status, body)
	}
	load()
	want(2)
}

// Far from its ceilings, a leased gateway admits requests against its
// slices: the metrics say so, and Redis runs a few lease calls, not two
// scripts per request.
func TestLeasedRequestsAreAdmittedLocally(t *testing.T) {
	srv := redistest.Start(t)
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$1000", period: month}, {name: rpm, kind: rate, unit: requests, amount: 100000, window: 1m}`,
		redisAddr:  srv.Addr, spoolDir: t.TempDir(),
	})
	for i := range 40 {
		if status, _, body, err := send(http.DefaultClient, h.url, chatBody(i, i%2 == 0)); err != nil || status != 200 {
			t.Fatalf("request %d: %d %s %v", i, status, body, err)
		}
	}
	fams := h.scrape()
	local := value(t, fams, "tollgate_lease_reservations_total", map[string]string{"path": "local"})
	exact := value(t, fams, "tollgate_lease_reservations_total", map[string]string{"path": "exact"})
	if local < 35 || local+exact != 40 {
		t.Fatalf("of 40 requests %v were admitted locally and %v exactly", local, exact)
	}
	if calls := value(t, fams, "tollgate_lease_calls_total", nil); calls > 10 {
		t.Fatalf("%v lease calls for 40 requests", calls)
	}
}

// A sharded rate limit on Redis: its shards sit in slots of their own
// (tg:{acme~i}), together they admit no more than the limit, a refusal is
// the rate limit's, and the team's budget is charged what the upstream
// reported — leases off and on.
func TestShardedRateLimitOnRedis(t *testing.T) {
	for _, mode := range []struct{ name, extra string }{{"exact", "    exact: true\n"}, {"leased", ""}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.Start(t)
			h := startWith(t, setup{
				teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$1000", period: month}, {name: hot, kind: rate, unit: requests, amount: 8, window: 1h, shards: 4}`,
				redisAddr:  srv.Addr, spoolDir: t.TempDir(), redisExtra: mode.extra,
			})
			ok := 0
			for i := range 40 {
				status, _, body, err := send(http.DefaultClient, h.url, chatBody(i, i%2 == 0))
				switch {
				case err != nil:
					t.Fatal(err)
				case status == 200:
					ok++
				case status != 429 || !strings.Contains(body, `"rate_limit_exceeded"`):
					t.Fatalf("request %d: %d %s", i, status, body)
				}
			}
			if ok == 0 || ok > 8 {
				t.Fatalf("%d of 40 requests passed a limit of 8 in 4 shards", ok)
			}
			keys, err := h.rdb.Keys(ctx, "tg:{acme~*}:r:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) < 2 {
				t.Fatalf("shard keys %v: want the shards in slots of their own", keys)
			}
			spent, pending, reported := h.settledAsReported("test-model")
			if spent != reported || pending != 0 || spent == 0 {
				t.Fatalf("spent %d pending %d; the upstream reported usage worth %d", spent, pending, reported)
			}
		})
	}
}

// On Redis a settlement is a round trip, and it runs after the handler: a
// stream's last chunk reaches the client, and its connection takes the
// next request, before the settlement is over (it waits on Redis, held by
// CLIENT PAUSE WRITE from the upstream's handler). It lands when Redis
// takes writes again.
func TestSettlementIsOffTheConnectionsPath(t *testing.T) {
	srv := redistest.Start(t)
	pauser := srv.Client()
	var paused atomic.Bool
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$1000", period: month}`,
		redisAddr:  srv.Addr, spoolDir: t.TempDir(), redisExtra: "    exact: true\n",
		sim: simulated.Options{Before: func(*http.Request) {
			if paused.CompareAndSwap(false, true) {
				// Shorter than the gateway's Redis read timeout (2 s):
				// the settlement waits, it does not fail.
				if err := pauser.Do(context.Background(), "CLIENT", "PAUSE", 1500, "WRITE").Err(); err != nil {
					t.Error(err)
				}
			}
		}},
	})
	// settlements is how many settlement calls have ended, well or not.
	settlements := func() uint64 {
		for _, m := range h.scrape()["tollgate_store_operation_duration_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "settle" {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	status, _, body, err := send(client, h.url, chatBody(1, true))
	if err != nil || status != 200 || !strings.Contains(body, "[DONE]") {
		t.Fatalf("stream: %d %v %s", status, err, body)
	}
	if n := settlements(); n != 0 {
		t.Fatal("the stream ended after its settlement: the client waited for a Redis round trip")
	}
	resp, err := client.Get(h.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := settlements(); n != 0 {
		t.Fatal("the connection took its next request only after the settlement")
	}
	if err := pauser.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	spent, pending := h.redisSpent()
	if reported := h.reportedCost("test-model"); spent != reported || pending != 0 || spent == 0 {
		t.Fatalf("after Redis took writes again: spent %d pending %d; the upstream reported %d", spent, pending, reported)
	}
}

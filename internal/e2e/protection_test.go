package e2e_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// faulty is a simulated upstream that can be told to fail.
type faulty struct {
	sim    *simulated.Server
	srv    *httptest.Server
	status atomic.Int64 // non-zero: answer every request with it
	calls  atomic.Int64
	header http.Header
	// hold, if set, keeps each request at the upstream until it is closed.
	hold chan struct{}
}

func newFaulty(t *testing.T, opts simulated.Options) *faulty {
	t.Helper()
	sim, err := simulated.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &faulty{sim: sim, header: http.Header{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if f.hold != nil {
			<-f.hold
		}
		if s := f.status.Load(); s != 0 {
			for k, v := range f.header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(s))
			io.WriteString(w, `{"error":{"message":"injected","type":"server_error","code":"injected"}}`)
			return
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// protected runs a gateway over upstreams primary (and, if given, backup,
// its fallback), both serving test-model; backup charges double.
func protected(t *testing.T, primary, backup *faulty, primaryExtra string) (url string, a *app.App) {
	t.Helper()
	src := `
upstreams:
  - name: primary
    base_url: ` + primary.srv.URL + `/v1
    models: [test-model]
    breaker: {failures: 3, open_for: 300ms}
` + primaryExtra
	if backup != nil {
		src += `    fallbacks: [backup]
  - name: backup
    base_url: ` + backup.srv.URL + `/v1
    models: [test-model]
    prices: {test-model: {input: "$2", output: "$4"}}
`
	}
	src += `
models:
  test-model: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}` + acmeML
	return apptest.Serve(t, src, nil)
}

func spentNow(t *testing.T, a *app.App) (int64, int64) {
	t.Helper()
	period := budget.PeriodID(budget.Month, time.Now(), nil)
	var spent, pending int64
	testkit.WaitFor(5*time.Second, func() bool {
		spent, pending = a.Store().Spent(teamMonth, period)
		return pending == 0
	})
	return spent, pending
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	up := newFaulty(t, simulated.Options{})
	url, a := protected(t, up, nil, "")
	up.status.Store(500)
	for i := range 3 {
		if status, _, _, _ := send(http.DefaultClient, url, chatBody(i, false)); status != 500 {
			t.Fatalf("failure %d passed through as %d", i, status)
		}
	}
	calls := up.calls.Load()
	status, hdr, body, _ := send(http.DefaultClient, url, chatBody(9, false))
	if status != 503 || !strings.Contains(body, "upstream_circuit_open") || hdr.Get("Retry-After") == "" {
		t.Fatalf("with the breaker open: %d %s (Retry-After %q)", status, body, hdr.Get("Retry-After"))
	}
	if up.calls.Load() != calls {
		t.Fatal("a request went upstream while the breaker was open")
	}
	if spent, pending := spentNow(t, a); spent != 0 || pending != 0 {
		t.Fatalf("failed and refused requests were charged: spent %d pending %d", spent, pending)
	}
	up.status.Store(0)
	time.Sleep(350 * time.Millisecond) // open_for: the breaker half-opens
	if status, _, _, _ := send(http.DefaultClient, url, chatBody(10, false)); status != 200 {
		t.Fatalf("the probe after open_for: %d", status)
	}
	if status, _, _, _ := send(http.DefaultClient, url, chatBody(11, false)); status != 200 {
		t.Fatalf("after a good probe the breaker should be closed: %d", status)
	}
}

func TestFallbackServesAtItsPrice(t *testing.T) {
	primary := newFaulty(t, simulated.Options{})
	backup := newFaulty(t, simulated.Options{})
	url, a := protected(t, primary, backup, "")
	primary.status.Store(503)
	for i := range 3 {
		send(http.DefaultClient, url, chatBody(i, false)) // trip the primary
	}
	status, hdr, body, _ := send(http.DefaultClient, url, chatBody(5, false))
	if status != 200 || hdr.Get("X-Tollgate-Upstream") != "backup" {
		t.Fatalf("with the primary's breaker open: %d from %q: %s", status, hdr.Get("X-Tollgate-Upstream"), body)
	}
	u := backup.sim.Stats().Usage["test-model"]
	// The backup charges $2/$4 per 1M: twice the table price.
	if spent, _ := spentNow(t, a); spent != 2*u.PromptTokens+4*u.CompletionTokens || spent == 0 {
		t.Fatalf("spent %d, want the backup's price for %+v", spent, u)
	}
}

func TestUpstream429IsHonoured(t *testing.T) {
	up := newFaulty(t, simulated.Options{})
	url, _ := protected(t, up, nil, "")
	up.header.Set("Retry-After", "30")
	up.status.Store(429)
	if status, hdr, _, _ := send(http.DefaultClient, url, chatBody(1, false)); status != 429 || hdr.Get("Retry-After") != "30" {
		t.Fatalf("the upstream's 429: %d, Retry-After %q", status, hdr.Get("Retry-After"))
	}
	calls := up.calls.Load()
	status, hdr, body, _ := send(http.DefaultClient, url, chatBody(2, false))
	ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
	if status != 503 || !strings.Contains(body, "upstream_backing_off") || ra < 29 || ra > 30 || up.calls.Load() != calls {
		t.Fatalf("during the upstream's Retry-After: %d %s (Retry-After %q)", status, body, hdr.Get("Retry-After"))
	}
}

func TestQueueFullRefusesAndReleases(t *testing.T) {
	up := newFaulty(t, simulated.Options{ReplyTokens: func(uint64) int64 { return 20 }})
	up.hold = make(chan struct{})
	url, a := protected(t, up, nil, "    queue: {concurrency: 1, max_length: 1, max_wait: 5s}\n")
	type result struct {
		status int
		hdr    http.Header
		body   string
	}
	results := make(chan result, 3)
	go func() { // the one in flight, held at the upstream
		status, hdr, body, _ := send(http.DefaultClient, url, chatBody(0, true))
		results <- result{status, hdr, body}
	}()
	if !testkit.WaitFor(5*time.Second, func() bool { return up.calls.Load() == 1 }) {
		t.Fatal("the first request never reached the upstream")
	}
	for i := 1; i <= 2; i++ { // one waits in the queue; the other finds it full
		go func() {
			status, hdr, body, _ := send(http.DefaultClient, url, chatBody(i, i == 1))
			results <- result{status, hdr, body}
		}()
	}
	if r := <-results; r.status != 503 || !strings.Contains(r.body, "upstream_queue_full") || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("the request past the queue: %d %s (Retry-After %q)", r.status, r.body, r.hdr.Get("Retry-After"))
	}
	close(up.hold)
	for range 2 {
		if r := <-results; r.status != 200 {
			t.Fatalf("a queued request ended %d %s", r.status, r.body)
		}
	}
	u := up.sim.Stats().Usage["test-model"]
	if spent, pending := spentNow(t, a); spent != u.PromptTokens+2*u.CompletionTokens || pending != 0 || u.Requests != 2 {
		t.Fatalf("spent %d pending %d for %+v: the refused request must leave nothing", spent, pending, u)
	}
}

func TestUpstreamTimeouts(t *testing.T) {
	// Each is abandoned after the request reached the upstream, which
	// bills it: charged its reservation, the ledger saying why.
	abandoned := func(t *testing.T, a *app.App, settled *settlements, cause string) {
		t.Helper()
		spent, pending := spentNow(t, a)
		e := settled.wait(t, 1)[0]
		if pending != 0 || spent != int64(e.Reserved) || e.Cost != e.Reserved || e.Settlement != "reservation" || e.Abandoned != cause {
			t.Fatalf("spent %d pending %d, entry %+v: want the reservation, abandoned for %s", spent, pending, e, cause)
		}
	}
	t.Run("first byte", func(t *testing.T) {
		up := newFaulty(t, simulated.Options{Latency: 500 * time.Millisecond})
		url, a := protected(t, up, nil, "    first_byte_timeout: 100ms\n")
		settled := recordSettlements(a)
		status, _, body, _ := send(http.DefaultClient, url, chatBody(1, false))
		if status != 504 || !strings.Contains(body, "upstream_timeout") {
			t.Fatalf("no headers within first_byte_timeout: %d %s", status, body)
		}
		abandoned(t, a, settled, "first_byte_timeout")
	})
	t.Run("idle gap in a stream", func(t *testing.T) {
		up := newFaulty(t, simulated.Options{ChunkDelay: 300 * time.Millisecond, ReplyTokens: func(uint64) int64 { return 40 }})
		url, a := protected(t, up, nil, "    idle_timeout: 100ms\n")
		settled := recordSettlements(a)
		status, _, body, _ := send(http.DefaultClient, url, chatBody(1, true))
		if status != 200 || strings.Contains(body, "[DONE]") {
			t.Fatalf("a stalled stream: %d, ended with [DONE]: %v", status, strings.Contains(body, "[DONE]"))
		}
		abandoned(t, a, settled, "idle_timeout")
	})
	t.Run("a stream past the whole exchange's timeout", func(t *testing.T) {
		// Chunks 300 ms apart, well within the idle timeout, for some 3 s:
		// the 1 s timeout of the whole exchange cuts the stream.
		up := newFaulty(t, simulated.Options{ChunkDelay: 300 * time.Millisecond, ReplyTokens: func(uint64) int64 { return 100 }})
		url, a := protected(t, up, nil, "    timeout: 1s\n    idle_timeout: 2s\n")
		settled := recordSettlements(a)
		start := time.Now()
		status, _, body, _ := send(http.DefaultClient, url, chatBody(1, true))
		took := time.Since(start)
		if status != 200 || strings.Contains(body, "[DONE]") || took > 2200*time.Millisecond {
			t.Fatalf("a stream past its timeout: %d in %v, ended with [DONE]: %v", status, took, strings.Contains(body, "[DONE]"))
		}
		abandoned(t, a, settled, "timeout")
	})
}

// Every way a stream can go wrong ends in one ledger entry with the right
// amount and the right "estimated" flag, charged exactly once: the
// upstream's usage where it reported it, else the reservation.
func TestStreamFaultsAreChargedOnce(t *testing.T) {
	const capTokens = 20
	body := `{"model":"test-model","stream":true,"max_tokens":` + strconv.Itoa(capTokens) + `,"messages":[{"role":"user","content":"tell me a long story"}]}`
	tests := []struct {
		desc      string
		fault     simulated.Fault
		reply     int64
		estimated bool
		// want returns the output tokens the entry must charge, given what
		// the upstream delivered and reported.
		want func(delivered, reported int64) int64
	}{
		// Without its usage, what a stream generated is not what was
		// relayed (the upstream went on, or thought unseen): charged its
		// reservation.
		{"truncated stream: the reservation", simulated.Truncate, 16, true, func(_, _ int64) int64 { return capTokens }},
		{"usage dropped: the reservation", simulated.DropUsage, 16, true, func(_, _ int64) int64 { return capTokens }},
		{"stalled stream cut by the idle timeout: the reservation", simulated.Stall, 16, true, func(_, _ int64) int64 { return capTokens }},
		{"usage sent twice: counted once", simulated.DoubleUsage, 16, false, func(_, r int64) int64 { return r }},
		{"max_tokens ignored: cut at the bound, charged the reservation", simulated.IgnoreMaxTokens, 400, true, func(_, _ int64) int64 { return capTokens }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newFaulty(t, simulated.Options{Fault: tc.fault, ReplyTokens: func(uint64) int64 { return tc.reply }})
			url, a := protected(t, up, nil, "    idle_timeout: 200ms\n")
			var mu sync.Mutex
			var entries []budget.Entry
			a.Gateway().OnSettle(func(e budget.Entry) { mu.Lock(); entries = append(entries, e); mu.Unlock() })

			req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			spent, pending := spentNow(t, a)
			mu.Lock()
			defer mu.Unlock()
			if len(entries) != 1 {
				t.Fatalf("%d ledger entries, want 1", len(entries))
			}
			e := entries[0]
			st := up.sim.Stats().Usage["test-model"]
			wantOut := tc.want(st.DeliveredTokens, st.CompletionTokens)
			if e.Usage.OutputTokens != wantOut || e.Usage.Estimated != tc.estimated {
				t.Fatalf("entry output %d estimated %v; want %d and %v (delivered %d, reported %d)",
					e.Usage.OutputTokens, e.Usage.Estimated, wantOut, tc.estimated, st.DeliveredTokens, st.CompletionTokens)
			}
			if e.Cost != budget.Money(e.Usage.InputTokens+2*e.Usage.OutputTokens) || spent != int64(e.Cost) || pending != 0 {
				t.Fatalf("entry cost %v for %+v; budget spent %d pending %d", e.Cost, e.Usage, spent, pending)
			}
			if tc.fault == simulated.IgnoreMaxTokens {
				if e.Cost != e.Reserved || !strings.Contains(string(got), "output_limit_reached") || !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
					t.Fatalf("overrun: cost %v reserved %v; stream ends %q", e.Cost, e.Reserved, tail(got))
				}
				if n := strings.Count(string(got), `"content":" `); n*2 > capTokens {
					t.Fatalf("the client got %d content chunks (2 tokens each) past a %d-token cap", n, capTokens)
				}
			}
		})
	}
}

func tail(b []byte) string {
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}

// An Azure OpenAI upstream: the deployment in the path, api-version in the
// query, the key in api-key; the client still calls /v1/chat/completions.
func TestAzureUpstream(t *testing.T) {
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sawPath, sawVersion, sawKey, sawAuth string
	azure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawPath, sawVersion, sawKey, sawAuth = r.URL.Path, r.URL.Query().Get("api-version"), r.Header.Get("Api-Key"), r.Header.Get("Authorization")
		if r.URL.Path != "/openai/deployments/prod-4o/chat/completions" {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/v1/chat/completions"
		sim.ServeHTTP(w, r)
	}))
	defer azure.Close()
	src := `
upstreams:
  - {name: azure, kind: azure, base_url: "` + azure.URL + `/openai", api_key: azure-key, api_version: 2024-10-21,
     models: [test-model], deployments: {test-model: prod-4o}}
models:
  test-model: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
orgs: [{id: acme, teams: [{id: ml, limits: [` + monthlyTen + `], keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]}]}]
`
	url, a := apptest.Serve(t, src, nil)
	status, _, body, err := send(http.DefaultClient, url, chatBody(1, false))
	if err != nil || status != 200 {
		t.Fatalf("%d %v %s (upstream saw %s)", status, err, body, sawPath)
	}
	if sawVersion != "2024-10-21" || sawKey != "azure-key" || sawAuth != "" {
		t.Fatalf("azure request: version %q, api-key %q, authorization %q", sawVersion, sawKey, sawAuth)
	}
	u := sim.Stats().Usage["test-model"]
	if spent, _ := spentNow(t, a); spent != u.PromptTokens+2*u.CompletionTokens || spent == 0 {
		t.Fatalf("spent %d for %+v", spent, u)
	}
}

package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// The gateway's package tests run the sequence on the embedded store, on
// a clock of their own, against a fake provider: a RoundTripper that
// answers as the upstream would (usage in its JSON, SSE with a usage
// chunk), or fails as it would, and tells the test what it received.

const (
	fullKey   = "tg-k1"
	narrowKey = "tg-k2" // may use m only
	openKey   = "tg-oncall"
	secret    = "a-bypass-secret-of-enough-length-0000"
)

// baseConfig prices m at $1 per 1M input and $2 per 1M output tokens, so
// a request costs input + 2 × output µ$; m2 costs three times that at
// upstream backup. TEAM_LIMITS and TOP are filled per test.
const baseConfig = `
TOP
bypass: {secrets: [{id: batch, secret: "` + secret + `"}]}
paid_routes:
  - {name: search, prefix: /paid/search, base_url: "http://paid.test/api", api_key: paid-secret, auth_header: X-Api-Key,
     per_request: "$0.001", per_unit: "$0.0001", units_header: X-Units, units_limit: {query: limit}, max_units: 100}
upstreams:
  - name: main
    base_url: http://main.test/v1
    api_key: main-secret
    models: [m, m2]
    fallbacks: [backup]
    breaker: {failures: 1, open_for: 1h}
    QUEUE
  - name: backup
    base_url: http://backup.test/v1
    api_key: backup-secret
    models: [m2]
    prices: {m2: {input: "$3", output: "$6"}}
  - name: claude
    kind: anthropic
    base_url: http://claude.test
    api_key: claude-secret
    models: [claude]
models:
  m:      {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
  m2:     {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
  claude: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [TEAM_LIMITS]
        keys:
          - {id: k1, hash: "HASH1"}
          - {id: k2, hash: "HASH2", models: [m]}
          - {id: oncall, hash: "HASH3", unlimited: true}
`

// setup is what one fixture differs in.
type setup struct {
	teamLimits string // YAML flow items
	top        string // more top-level YAML
	queue      string // the main upstream's queue, YAML
	async      bool   // settle after the response
	// wrap, if set, is the backend the engine runs on, around the
	// fixture's embedded store.
	wrap     func(*memstore.Store) budget.Backend
	fallback *budget.Engine
	keys     policy.KeyRegistry
	intn     func(n int) int
}

type fixture struct {
	t       *testing.T
	gw      *gateway.Gateway
	store   *memstore.Store
	engine  *budget.Engine
	clock   *testkit.Clock
	up      *fakeUpstream
	reg     *prometheus.Registry
	metrics *metrics.Metrics

	mu      sync.Mutex
	entries []budget.Entry
}

func newFixture(t *testing.T, su setup) *fixture {
	t.Helper()
	src := strings.NewReplacer("TEAM_LIMITS", su.teamLimits, "TOP", su.top, "QUEUE", su.queue,
		"HASH1", policy.HashKey(fullKey), "HASH2", policy.HashKey(narrowKey), "HASH3", policy.HashKey(openKey)).Replace(baseConfig)
	cfg, err := config.Parse([]byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: testkit.NewClock(time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)), up: &fakeUpstream{}, reg: prometheus.NewRegistry()}
	f.store, err = memstore.New(memstore.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var backend budget.Backend = f.store
	if su.wrap != nil {
		backend = su.wrap(f.store)
	}
	f.engine = budget.NewEngine(backend, time.Minute).WithClock(f.clock.Now)
	f.metrics = metrics.New(f.reg)
	f.gw, err = gateway.New(cfg, gateway.Options{Engine: f.engine, Fallback: su.fallback, Metrics: f.metrics, Transport: f.up,
		Keys: su.keys, SettleAfterResponse: su.async, Now: f.clock.Now, IntN: su.intn})
	if err != nil {
		t.Fatal(err)
	}
	f.gw.OnSettle(func(e budget.Entry) { f.mu.Lock(); f.entries = append(f.entries, e); f.mu.Unlock() })
	t.Cleanup(f.gw.Drain)
	return f
}

// request is a client request with key to route, with body.
func (f *fixture) request(key, route, body string) gateway.Request {
	f.t.Helper()
	st := f.gw.Settings()
	p, ok := f.gw.Lookup(st, key)
	if !ok {
		f.t.Fatalf("key %s not found", key)
	}
	return gateway.Request{ID: gateway.NewID(), Principal: p, Settings: st, Route: route, IP: "198.51.100.7",
		Body: func() ([]byte, error) { return []byte(body), nil }, Method: "POST", Target: route, Header: http.Header{}}
}

// outcome is what one request through every step came to.
type outcome struct {
	call *gateway.Call
	err  error // Admit's or Forward's
	resp *httptest.ResponseRecorder
}

// do runs req through every step, as the HTTP adapter does.
func (f *fixture) do(ctx context.Context, ep bound.Endpoint, req gateway.Request) outcome {
	f.t.Helper()
	cl, err := f.gw.Admit(ctx, ep, req)
	return f.serve(ctx, cl, err)
}

func (f *fixture) serve(ctx context.Context, cl *gateway.Call, err error) outcome {
	defer f.gw.Done(cl)
	o := outcome{call: cl, err: err, resp: httptest.NewRecorder()}
	if err != nil {
		return o
	}
	o.err = f.gw.Forward(ctx, cl, o.resp)
	f.gw.Finish(ctx, cl)
	return o
}

func (f *fixture) chat(key, body string) outcome {
	f.t.Helper()
	return f.do(context.Background(), bound.Chat, f.request(key, "/v1/chat/completions", body))
}

// spent is the team's settled and pending spend this month.
func (f *fixture) spent() (spent, pending int64) {
	return f.store.Spent("team:acme/ml:usd-month", budget.PeriodID(budget.Month, f.clock.Now(), nil))
}

func (f *fixture) ledger() []budget.Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]budget.Entry(nil), f.entries...)
}

// counter is the value of a counter vector's series with labels.
func counter(t *testing.T, v *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	return testutil.ToFloat64(v.WithLabelValues(labels...))
}

// fakeUpstream is the provider's side: answer decides each request's
// response (nil: a chat answer with usage 10 in, 5 out); every request is
// kept, and arrived tells when one came.
type fakeUpstream struct {
	answer  atomic.Pointer[func(r *http.Request, body []byte) (*http.Response, error)]
	mu      sync.Mutex
	got     []received
	arrived chan string // the host of each request, if set
}

type received struct {
	host, path, query string
	header            http.Header
	body              string
}

func (u *fakeUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.got = append(u.got, received{host: r.URL.Host, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)})
	ch := u.arrived
	u.mu.Unlock()
	if ch != nil {
		ch <- r.URL.Host
	}
	if f := u.answer.Load(); f != nil {
		return (*f)(r, body)
	}
	return jsonAnswer(r, 200, chatJSON(10, 5)), nil
}

func (u *fakeUpstream) set(f func(r *http.Request, body []byte) (*http.Response, error)) {
	u.answer.Store(&f)
}

func (u *fakeUpstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

// upstreamDate is the Date every fake answer carries, as a real server's
// would.
const upstreamDate = "Tue, 01 Dec 2026 09:30:00 GMT"

func jsonAnswer(r *http.Request, status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}, "Date": {upstreamDate}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}
}

func sseAnswer(r *http.Request, events ...string) *http.Response {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(b.String())), Request: r}
}

func chatJSON(in, out int64) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// errRefusedConn is how a transport reports a connection never made:
// nothing of the request left.
var errRefusedConn error = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// errTimeout is how a transport reports a deadline it kept while it
// waited for the answer, the request sent: a net.Error that timed out.
var errTimeout error = &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

const hello = `{"model":"m","messages":[{"role":"user","content":"hello"}]}`

package e2e_test

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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const (
	testKey      = "tg-test-key-0001"
	narrowKey    = "tg-test-key-0002" // may use test-model only
	unlimitedKey = "tg-test-key-0003" // never refused by a limit
)

// baseConfig prices the test model at $1 per 1M input tokens and $2 per 1M
// output tokens, so a request's cost in µ$ is input + 2×output exactly and
// ledger totals can be checked to the micro-dollar from token totals.
const baseConfig = `
upstreams:
  - name: sim
    base_url: ${UPSTREAM}
    api_key: upstream-secret
    models: [gpt-4o, gpt-4o-mini, test-model, text-embedding-3-small, gpt-3.5-turbo-instruct]
models:
  gpt-4o:      {encoding: o200k_base, input: "$2.50", cached_input: "$1.25", output: "$10", max_output_tokens: 16384}
  gpt-4o-mini: {encoding: o200k_base, input: "$0.15", output: "$0.60", max_output_tokens: 16384}
  test-model:  {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
  text-embedding-3-small: {encoding: cl100k_base, input: "$0.02", embedding: true}
  gpt-3.5-turbo-instruct: {encoding: cl100k_base, input: "$1.50", output: "$2", max_output_tokens: 4096}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [TEAM_LIMITS]
        keys:
          - id: k1
            hash: ${KEY_HASH}
            limits: [KEY_LIMITS]
            models: [gpt-4o, gpt-4o-mini, test-model, text-embedding-3-small, gpt-3.5-turbo-instruct]
          - id: k2
            hash: ${NARROW_HASH}
            models: [test-model]
          - id: oncall
            hash: ${UNLIMITED_HASH}
            unlimited: true
`

type harness struct {
	t        testing.TB
	sim      *simulated.Server
	app      *app.App
	url      string
	apps     []*app.App         // every instance (app is the first)
	urls     []string           // every instance's address (url is the first)
	servers  []*httptest.Server // every instance's HTTP server
	rdb      *redis.Client
	gwCalls  atomic.Int64 // requests that reached the gateway
	upCalls  atomic.Int64 // requests that reached the upstream
	upBodies chan []byte
	upMu     sync.Mutex
	upTimes  []time.Time // when each request reached the upstream
	upHeader http.Header // the last request's headers at the upstream
}

// start runs the simulated upstream and a gateway whose ml team has
// teamLimits (YAML flow items).
func start(t testing.TB, teamLimits string, simOpts simulated.Options) *harness {
	t.Helper()
	return startWith(t, setup{teamLimits: teamLimits, sim: simOpts})
}

// setup describes a harness: the team's limits, the simulated upstream,
// and, for a shared store, the Redis address and how many gateway
// instances share it.
type setup struct {
	teamLimits string
	// keyLimits are the k1 key's own limits (YAML flow items).
	keyLimits string
	sim       simulated.Options
	redisAddr string
	// redisCluster, instead of redisAddr, is a Redis Cluster's nodes.
	redisCluster []string
	instances    int
	spoolDir     string
	// redisExtra is more YAML under store.redis (indented four spaces).
	redisExtra string
	// upstreamExtra is more YAML for the upstream (indented four spaces).
	upstreamExtra string
	// topExtra is more top-level YAML; ${LEDGER} in it is a file of the
	// instance's own in spoolDir (for ledger_path).
	topExtra string
	// pgDSN, if set, is the PostgreSQL ledger (ledger_postgres).
	pgDSN string
}

func startWith(t testing.TB, su setup) *harness {
	t.Helper()
	simOpts, teamLimits := su.sim, su.teamLimits
	h := &harness{t: t, upBodies: make(chan []byte, 1024)}
	if simOpts.APIKey == "" {
		simOpts.APIKey = "upstream-secret"
	}
	sim, err := simulated.New(simOpts)
	if err != nil {
		t.Fatal(err)
	}
	h.sim = sim
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.upCalls.Add(1)
		h.upMu.Lock()
		h.upTimes = append(h.upTimes, time.Now())
		h.upHeader = r.Header.Clone()
		h.upMu.Unlock()
		body, _ := io.ReadAll(r.Body)
		select {
		case h.upBodies <- body:
		default:
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	src := strings.Replace(baseConfig, "TEAM_LIMITS", teamLimits, 1)
	src = strings.Replace(src, "KEY_LIMITS", su.keyLimits, 1)
	src = strings.Replace(src, "    api_key: upstream-secret\n", "    api_key: upstream-secret\n"+su.upstreamExtra, 1)
	src = su.topExtra + src
	if su.pgDSN != "" {
		src = "ledger_postgres: ${PG}\n" + src
	}
	if su.redisAddr != "" {
		// Generous store timeouts: these tests check what the gateway
		// decides, on a CI machine running every package at once under
		// -race (500 concurrent reservations once outlasted 1 s there).
		// Outages here are killed servers — refused connections, not
		// timeouts; the store's own tests cover slow and frozen Redis.
		src = "store:\n  kind: redis\n  redis:\n    addrs:\n      - ${REDIS}\n    spool_path: ${SPOOL}\n    timeout: 3s\n    settle_timeout: 3s\n" + su.redisExtra + src
		h.rdb = redis.NewClient(&redis.Options{Addr: su.redisAddr})
		t.Cleanup(func() { h.rdb.Close() })
	}
	if len(su.redisCluster) > 0 {
		src = "store:\n  kind: redis\n  redis:\n    addrs: [" + strings.Join(su.redisCluster, ", ") + "]\n    spool_path: ${SPOOL}\n    timeout: 3s\n    settle_timeout: 3s\n" + su.redisExtra + src
	}
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for i := range max(su.instances, 1) {
		vars := map[string]string{"UPSTREAM": up.URL + "/v1", "KEY_HASH": policy.HashKey(testKey), "NARROW_HASH": policy.HashKey(narrowKey), "UNLIMITED_HASH": policy.HashKey(unlimitedKey),
			"REDIS": su.redisAddr, "PG": su.pgDSN, "SPOOL": filepath.Join(su.spoolDir, fmt.Sprintf("spool-%d.jsonl", i)),
			"LEDGER": filepath.Join(su.spoolDir, fmt.Sprintf("ledger-%d.jsonl", i))}
		a, err := app.New(apptest.Config(t, src, vars), log)
		if err != nil {
			t.Fatal(err)
		}
		stop := a.Background(context.Background())
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.gwCalls.Add(1)
			a.Handler().ServeHTTP(w, r)
		}))
		t.Cleanup(func() {
			gw.Close()
			stop()
			if err := a.Close(); err != nil {
				t.Errorf("closing instance %d: %v", i, err)
			}
		})
		h.apps = append(h.apps, a)
		h.urls, h.servers = append(h.urls, gw.URL), append(h.servers, gw)
	}
	h.app, h.url = h.apps[0], h.urls[0]
	return h
}

func (h *harness) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(h.url + "/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
	}, opts...)...)
}

// spent returns the team's settled and pending spend this month, once
// settlements in flight have landed: a client has its answer before the
// gateway settles, so a test that reads spend right after a response must
// wait for them (up to 5 s).
func (h *harness) spent(bucket string) (spent, pending int64) {
	period := budget.PeriodID(budget.Month, time.Now(), nil)
	testkit.WaitFor(5*time.Second, func() bool {
		spent, pending = h.app.Store().Spent(bucket, period)
		return pending == 0
	})
	return spent, pending
}

// reportedCost is what the simulated upstream reported for test-model,
// priced at $1/$2 per 1M tokens: exact in µ$.
func (h *harness) reportedCost(model string) int64 {
	u := h.sim.Stats().Usage[model]
	return u.PromptTokens + 2*u.CompletionTokens
}

const teamMonth = "team:acme/ml:usd-month"

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// isBudgetRefusal reports whether s (a body or a code) names one of the
// three budget refusals: exhausted, too large for what remains, held.
// budgetRefused reports whether an answer is a budget's refusal: 400
// for a budget spent or too small for the request (final), 429 for one
// held by requests in flight (retry in seconds), with its code.
func budgetRefused(status int, body string) bool {
	return (status == http.StatusBadRequest || status == http.StatusTooManyRequests) && isBudgetRefusal(body)
}

func isBudgetRefusal(s string) bool {
	for _, code := range []string{"insufficient_quota", "request_exceeds_budget_remaining", "budget_held_by_requests_in_flight"} {
		if strings.Contains(s, code) {
			return true
		}
	}
	return false
}

// acmeML is the orgs section most tests share: org acme, team ml with $10
// a month, key k1 (testKey).
var acmeML = `
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [` + monthlyTen + `]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`

// settlements collects the ledger entries a gateway settles.
type settlements struct {
	mu      sync.Mutex
	entries []budget.Entry
}

func recordSettlements(a *app.App) *settlements {
	s := &settlements{}
	a.Gateway().OnSettle(func(e budget.Entry) { s.mu.Lock(); s.entries = append(s.entries, e); s.mu.Unlock() })
	return s
}

func (s *settlements) all() []budget.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// wait returns the entries once there are at least n: the ledger is
// handed an entry after the store has settled it, so a test that saw the
// spend settled may still be ahead of its entry.
func (s *settlements) wait(t *testing.T, n int) []budget.Entry {
	t.Helper()
	testkit.WaitFor(5*time.Second, func() bool { return len(s.all()) >= n })
	entries := s.all()
	if len(entries) < n {
		t.Fatalf("%d settlements handed to the ledger in 5 s, want %d", len(entries), n)
	}
	return entries
}

// accumulate reads an Anthropic stream to its end into one message.
func accumulate(t *testing.T, stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) (anthropic.Message, error) {
	t.Helper()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	return acc, stream.Err()
}

// simulatedUpstream serves a simulated upstream with opts until the test
// ends, and returns it with its URL.
func simulatedUpstream(t *testing.T, opts simulated.Options) (*simulated.Server, string) {
	t.Helper()
	sim, err := simulated.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	return sim, up.URL
}

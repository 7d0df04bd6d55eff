// Package gateway is the one request sequence, for LLM and paid routes
// alike: Admit (read, estimate, limits, bypass, reserve — or degrade while
// the store is away —, clamp, shadow counts, alerts), Forward (queue,
// breaker, provider, relay the answer as it streams) and Finish (settle,
// ledger, alerts, metrics). Each step is a method the HTTP adapter calls
// in order; none knows Echo. Errors are the package's sentinels and types
// (and budget's and upstream's): the adapter's one error table turns them
// into responses.
//
// It must not import HTTP frameworks: it writes answers to an
// http.ResponseWriter and takes what it needs of a request as a Request.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/topk"
	"github.com/tollgate-dev/tollgate/internal/uid"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// Gateway runs the request sequence in front of the configured upstreams.
// Create it with New. Reload swaps its config-derived Settings atomically:
// a request uses one snapshot from start to end.
type Gateway struct {
	engine   *budget.Engine
	fallback *budget.Engine
	log      *slog.Logger
	metrics  *metrics.Metrics
	degraded sync.Map // mode → *atomic.Int64
	settings atomic.Pointer[Settings]

	ledger    atomic.Pointer[func(budget.Entry)]
	keys      policy.KeyRegistry // run-time API keys, or nil
	keySet    atomic.Pointer[keySet]
	alerts    *alerter
	holds     holdTimer         // how long reservations stay open
	transport http.RoundTripper // set in tests; nil: one per upstream
	pacer     func(upstream string) queue.Pacer
	now       func() time.Time
	intn      func(n int) int
	stateMu   sync.Mutex
	upstreams map[string]*upstreamState

	// settleAsync runs settlements after the response (Options.SettleAfterResponse),
	// on settling's workers.
	settleAsync bool
	settling    settler

	// refusedKeys counts limit refusals by org/key in bounded memory.
	refusedKeys *topk.Sketch
	tracer      trace.Tracer // nil: tracing off

	watch     watchdog     // the upstream exchanges in flight
	admitting func() error // Options.Admitting, or nil
}

// RefusedKeysTracked is how many keys the refused-keys sketch keeps: the
// top ten it reports are exact up to a small overcount unless refusals
// are spread over more than ~100 keys evenly.
const RefusedKeysTracked = 100

// TopRefusedKeys are the n keys ("org/key") this instance refused most
// since it started, by limit refusals.
func (g *Gateway) TopRefusedKeys(n int) []topk.Entry { return g.refusedKeys.Top(n) }

// Options are the gateway's collaborators. Engine is required.
type Options struct {
	Engine *budget.Engine
	// Tracer, if set, traces each step of a request (OpenTelemetry).
	Tracer trace.Tracer
	Log    *slog.Logger
	// Transport carries upstream requests; nil means a pooled transport
	// tuned for many concurrent streams to few hosts.
	Transport http.RoundTripper
	// Fallback is the local engine a route in local_fallback mode reserves
	// from while the store is unavailable; its limits are divided by the
	// configured instance count.
	Fallback *budget.Engine
	// Metrics receive the gateway's measurements; nil means a private
	// registry nobody reads.
	Metrics *metrics.Metrics
	// Pacer, if set, returns the shared drain of an upstream's queue (all
	// instances together keep its rate); nil paces each instance alone.
	Pacer func(upstream string) queue.Pacer
	// Keys holds API keys made at run time (the admin API); nil: config
	// keys only.
	Keys policy.KeyRegistry
	// SettleAfterResponse makes Finish settle on a worker after it
	// returns, for a store a settlement costs a round trip to: the
	// client's response is complete (a stream's last chunk sent) and its
	// connection free for its next request before that round trip. Drain
	// waits for them. Off, Finish settles before it returns.
	SettleAfterResponse bool
	// Now is the clock of periods, leases and timings; nil: time.Now.
	Now func() time.Time
	// IntN draws the random numbers that pick an alias's deployment, a
	// number in [0, n); nil: math/rand/v2's. Tests pin it.
	IntN func(n int) int
	// Admitting, if set, is asked before every admission: an error
	// (ErrLedgerUnavailable) refuses the request before anything is
	// reserved or forwarded.
	Admitting func() error
}

// New builds a gateway for c, loading every tokenizer it needs.
func New(c *config.Config, opts Options) (*Gateway, error) {
	if opts.Engine == nil {
		return nil, errors.New("gateway: no budget engine")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New(prometheus.NewRegistry())
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IntN == nil {
		opts.IntN = mrand.IntN
	}
	g := &Gateway{
		watch:     watchdog{now: time.Now}, // the wall's time, as timers keep it
		engine:    opts.Engine,
		log:       opts.Log,
		fallback:  opts.Fallback,
		metrics:   opts.Metrics,
		transport: opts.Transport,
		pacer:     opts.Pacer,
		keys:      opts.Keys,
		admitting: opts.Admitting,
		now:       opts.Now,
		intn:      opts.IntN,
		upstreams: map[string]*upstreamState{},

		settleAsync: opts.SettleAfterResponse,
		refusedKeys: topk.New(RefusedKeysTracked),
		tracer:      opts.Tracer,
	}
	st, err := g.newSettings(c)
	if err != nil {
		return nil, err
	}
	g.settings.Store(st)
	if opts.Keys != nil {
		if err := g.RefreshKeys(context.Background()); err != nil {
			// Start anyway: config keys work, run-time ones from the
			// first refresh that reads them.
			g.log.Warn("reading API keys from the registry", "err", err)
		}
	}
	if len(c.Alerts.Webhooks) > 0 {
		g.alerts = &alerter{g: g, thresholds: c.Alerts.Thresholds, webhooks: c.Alerts.Webhooks, pending: c.Alerts.IncludePending,
			client: &http.Client{Timeout: 10 * time.Second}, fired: map[string]bool{}}
		g.alerts.ctx, g.alerts.cancel = context.WithCancel(context.Background())
	}
	return g, nil
}

// Settings returns the settings in force: take them once per request.
func (g *Gateway) Settings() *Settings { return g.settings.Load() }

// Lookup finds the principal of a plain API key in st (config keys) or
// among the run-time keys as last read.
func (g *Gateway) Lookup(st *Settings, key string) (*policy.Principal, bool) {
	if p, ok := st.dir.Lookup(key); ok {
		return p, true
	}
	if ks := g.keySet.Load(); ks != nil {
		return ks.dir.Lookup(key)
	}
	return nil, false
}

// Engine returns the budget engine requests reserve from.
func (g *Gateway) Engine() *budget.Engine { return g.engine }

// Metrics returns the gateway's collectors.
func (g *Gateway) Metrics() *metrics.Metrics { return g.metrics }

// Log returns the gateway's logger.
func (g *Gateway) Log() *slog.Logger { return g.log }

// Degraded returns how many requests were let through in each degraded mode
// ("fail_open", "local_fallback") while the store was unavailable.
func (g *Gateway) Degraded(mode string) int64 {
	if v, ok := g.degraded.Load(mode); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (g *Gateway) countDegraded(mode string) {
	v, _ := g.degraded.LoadOrStore(mode, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// OnSettle sets the function every settlement is handed to (the ledger).
func (g *Gateway) OnSettle(f func(budget.Entry)) { g.ledger.Store(&f) }

// Drain waits for the settlements still running after their responses.
// Call it once the server has stopped taking requests, before the store
// is closed.
func (g *Gateway) Drain() { g.settling.drain() }

// EndExchanges ends every upstream exchange in flight — at shutdown, past
// the drain budget —: each is charged its reservation, unless its usage
// was read already. It returns how many it ended.
func (g *Gateway) EndExchanges() int { return g.watch.endAll(causeShutdown) }

// Settling is how many settlements are under way after their responses
// (Options.SettleAfterResponse): an alert or a ledger entry that a
// settlement makes is made by the time it is 0.
func (g *Gateway) Settling() int64 { return g.settling.n.Load() }

// NewID returns a new request id.
func NewID() string { return uid.Text(20) }

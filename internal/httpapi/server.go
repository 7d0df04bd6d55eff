// Package httpapi is the Echo adapter of the gateway: routes, middleware,
// the estimate → reserve → forward → settle pipeline and the one function
// that maps errors to status codes and headers.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// Gateway serves the OpenAI-compatible API in front of the configured
// upstreams. Create it with New; it is an http.Handler. Reload swaps its
// config-derived settings atomically: a request uses one settings snapshot
// from start to end.
type Gateway struct {
	echo     *echo.Echo
	engine   *budget.Engine
	log      *slog.Logger
	ready    func(context.Context) error
	fallback *budget.Engine
	degraded sync.Map // mode → *atomic.Int64
	metrics  *metrics.Metrics
	gatherer prometheus.Gatherer
	settings atomic.Pointer[settings]

	ledger    atomic.Pointer[func(Entry)]
	keys      policy.KeyRegistry // run-time API keys, or nil
	keySet    atomic.Pointer[keySet]
	alerts    *alerter
	guard     *authguard.Guard  // locks out addresses that fail authentication
	holds     holdTimer         // how long reservations stay open
	transport http.RoundTripper // set in tests; nil: one per upstream
	pacer     func(upstream string) queue.Pacer
	stateMu   sync.Mutex
	upstreams map[string]*upstreamState

	// settleAsync runs settlements after the handler (Options.SettleAfterResponse),
	// on settling's workers.
	settleAsync bool
	settling    settler
}

// settings is everything the gateway derives from a config.
type settings struct {
	cfg        *config.Config
	dir        *policy.Directory
	models     map[string]*modelRoute
	modelNames []string
	maxBody    int64
	userHeader string
	lease      time.Duration
	// What a route does when the store is unavailable (fail_closed when
	// absent), and the divisor of limits for local_fallback.
	onUnavailable map[string]string
	instances     int64
	// paid are the generic paid HTTP routes by name.
	paid map[string]*paidRoute
	// trusted proxies, for client IPs; authFail is the per-IP limit on
	// failed authentications (Amount 0: off).
	trusted    []netip.Prefix
	authFail   authguard.Policy
	bypass     *bypass
	routeCosts map[string]int64
	// fixed are the parts a reload cannot change (the store, the listener,
	// the paid routes' prefixes, which are mounted once).
	fixed string
}

// modelRoute is everything the pipeline needs for one model: how to count
// it, and the upstreams that may serve it, the primary first.
type modelRoute struct {
	model      upstream.Model
	candidates []candidate
}

// candidate is one upstream that may serve a model, at its price there.
type candidate struct {
	target *target
	price  budget.Price
}

// target is one upstream endpoint with its protection: a client with its
// timeouts, a breaker and an optional queue.
type target struct {
	name     string
	provider upstream.Provider // URL and authorisation of the upstream's dialect
	timeout  time.Duration     // the whole exchange
	idle     time.Duration     // between two stream chunks
	client   *http.Client
	breaker  *breaker.Breaker
	queue    *queue.Queue
}

// upstreamState is what outlives a reload for an upstream name: its
// breaker, and its queue while the queue's config is unchanged.
type upstreamState struct {
	breaker  *breaker.Breaker
	queue    *queue.Queue
	queueCfg config.Queue
}

// Options are the gateway's collaborators. Engine is required.
type Options struct {
	Engine *budget.Engine
	Log    *slog.Logger
	// Transport carries upstream requests; nil means a pooled transport
	// tuned for many concurrent streams to few hosts.
	Transport http.RoundTripper
	// Ready reports whether the gateway can serve (its store answers);
	// nil means always ready.
	Ready func(context.Context) error
	// Fallback is the local engine a route in local_fallback mode reserves
	// from while the store is unavailable; its limits are divided by the
	// configured instance count.
	Fallback *budget.Engine
	// Metrics receive the gateway's measurements; nil means a private
	// registry nobody reads.
	Metrics *metrics.Metrics
	// Gatherer, if set, is served at GET /metrics.
	Gatherer prometheus.Gatherer
	// Pacer, if set, returns the shared drain of an upstream's queue (all
	// instances together keep its rate); nil paces each instance alone.
	Pacer func(upstream string) queue.Pacer
	// Keys holds API keys made at run time (the admin API); nil: config
	// keys only.
	Keys policy.KeyRegistry
	// Guard locks out addresses that fail authentication; nil: one on
	// Engine's store, of the gateway's own.
	Guard *authguard.Guard
	// SettleAfterResponse settles each request after its handler has
	// returned, for a store a settlement costs a round trip to: the
	// client's response is complete (a stream's last chunk sent) and its
	// connection free for its next request before that round trip. Drain
	// waits for them. Off, a request settles before its handler returns.
	SettleAfterResponse bool
}

// New builds a gateway for c, loading every tokenizer it needs.
func New(c *config.Config, opts Options) (*Gateway, error) {
	if opts.Engine == nil {
		return nil, errors.New("httpapi: no budget engine")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New(prometheus.NewRegistry())
	}
	if opts.Guard == nil {
		opts.Guard = authguard.New(opts.Engine)
	}
	g := &Gateway{
		engine:    opts.Engine,
		log:       opts.Log,
		ready:     opts.Ready,
		fallback:  opts.Fallback,
		metrics:   opts.Metrics,
		gatherer:  opts.Gatherer,
		transport: opts.Transport,
		pacer:     opts.Pacer,
		keys:      opts.Keys,
		guard:     opts.Guard,
		upstreams: map[string]*upstreamState{},

		settleAsync: opts.SettleAfterResponse,
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
	}
	g.echo = g.routes()
	for _, r := range c.PaidRoutes {
		handler := g.authenticate(g.paid(r.Name))
		g.echo.Any(r.Prefix, handler)
		g.echo.Any(r.Prefix+"/*", handler)
	}
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.echo.ServeHTTP(w, r) }

func (g *Gateway) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = g.handleError
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		if g.ready != nil {
			if err := g.ready(c.Request().Context()); err != nil {
				return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if g.gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(g.gatherer, promhttp.HandlerOpts{})))
	}
	v1 := e.Group("/v1", g.authenticate)
	v1.POST("/chat/completions", g.proxy(upstream.Chat, "/v1/chat/completions"))
	v1.POST("/completions", g.proxy(upstream.Completions, "/v1/completions"))
	v1.POST("/embeddings", g.proxy(upstream.Embeddings, "/v1/embeddings"))
	v1.POST("/messages", g.proxy(upstream.Messages, "/v1/messages"))
	v1.POST("/responses", g.proxy(upstream.Responses, "/v1/responses"))
	v1.GET("/models", g.listModels)
	v1.GET("/budget", g.ownBudget)
	return e
}

const (
	principalKey = "tollgate.principal"
	settingsKey  = "tollgate.settings"
)

// authenticate resolves the API key (Authorization: Bearer, or x-api-key).
func (g *Gateway) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		key := h.Get("X-Api-Key")
		if auth := h.Get("Authorization"); auth != "" {
			scheme, token, ok := strings.Cut(auth, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return errBadKey
			}
			key = strings.TrimSpace(token)
		}
		st := g.settings.Load()
		// A locked-out address is refused whatever it sends, the right
		// key included: guessing stops, not merely slows.
		if wait, locked := g.guard.Locked(c.Request().Context(), st.authFail, authguard.ClientIP(c.Request(), st.trusted), time.Now()); locked {
			g.metrics.Refusals.WithLabelValues("auth_failures", "ip", authguard.Name, "").Inc()
			return &authThrottled{retryAfter: wait}
		}
		if key == "" {
			return g.authFailed(c, st, errNoKey)
		}
		p, ok := st.dir.Lookup(key)
		if !ok {
			if ks := g.keySet.Load(); ks != nil {
				p, ok = ks.dir.Lookup(key)
			}
		}
		if !ok {
			return g.authFailed(c, st, errBadKey)
		}
		c.Set(principalKey, p)
		c.Set(settingsKey, st) // the whole request uses the settings its key was found in
		return next(c)
	}
}

// authFailed counts a failed authentication against the client's IP: past
// the limit the address is locked out (429 with Retry-After) until the
// window ends, on every instance.
func (g *Gateway) authFailed(c echo.Context, st *settings, err error) error {
	g.metrics.Refusals.WithLabelValues("unauthorized", "", "", "").Inc()
	ip := authguard.ClientIP(c.Request(), st.trusted)
	if wait, locked := g.guard.Failed(c.Request().Context(), st.authFail, ip, time.Now()); locked {
		g.metrics.Refusals.WithLabelValues("auth_failures", "ip", authguard.Name, "").Inc()
		g.log.Warn("too many failed authentications: address locked out", "client_ip", ip, "for", wait)
		return &authThrottled{retryAfter: wait}
	}
	return err
}

// authThrottled refuses a client that failed authentication too often.
type authThrottled struct{ retryAfter time.Duration }

func (e *authThrottled) Error() string { return "httpapi: too many failed authentications" }

func principalOf(c echo.Context) *policy.Principal {
	p, _ := c.Get(principalKey).(*policy.Principal)
	return p
}

func settingsOf(c echo.Context) *settings {
	st, _ := c.Get(settingsKey).(*settings)
	return st
}

func (g *Gateway) listModels(c echo.Context) error {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	p, st := principalOf(c), settingsOf(c)
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range st.modelNames {
		if p.Allows(name) {
			list.Data = append(list.Data, model{ID: name, Object: "model", OwnedBy: st.models[name].candidates[0].target.name})
		}
	}
	return c.JSON(http.StatusOK, list)
}

// handleError writes every error as OpenAI error JSON.
func (g *Gateway) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			err = errNotFound
		case http.StatusMethodNotAllowed:
			err = errMethod
		case http.StatusRequestEntityTooLarge:
			err = errTooLarge
		default:
			err = errInternal
		}
	}
	g.writeRefusal(c, mapError(err), nil)
}

// writeRefusal writes a refusal with its headers; limits are the request's
// limits when the budget decided.
func (g *Gateway) writeRefusal(c echo.Context, r refusal, limits []budget.Limit) {
	h := c.Response().Header()
	writeRetryAfter(h, r.retryAfter)
	switch {
	case r.noRetry:
		h.Set("X-Should-Retry", "false")
	case r.retry:
		h.Set("X-Should-Retry", "true")
	}
	if r.result != nil && limits != nil {
		writeLimitHeaders(h, limits, *r.result)
	}
	if r.status >= 500 {
		g.log.Warn("refused", "status", r.status, "code", r.body.Code)
	}
	if c.Path() == "/v1/messages" {
		_ = c.JSON(r.status, anthropicError(r))
		return
	}
	_ = c.JSON(r.status, struct {
		Error apiError `json:"error"`
	}{r.body})
}

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

// Entry is one settlement, as the ledger records it.
type Entry = budget.Entry

// Mount lets another package add routes (the admin API) to the gateway's
// router.
func (g *Gateway) Mount(f func(*echo.Echo)) { f(g.echo) }

// afterResponse runs settle, a request's settlement: now, or (with
// Options.SettleAfterResponse) on its own goroutine, so that the handler
// returns first.
func (g *Gateway) afterResponse(settle func()) {
	if !g.settleAsync {
		settle()
		return
	}
	g.settling.run(settle)
}

// Drain waits for the settlements still running after their responses.
// Call it once the server has stopped taking requests, before the store
// is closed.
func (g *Gateway) Drain() { g.settling.drain() }

// OnSettle sets the function every settlement is handed to (the ledger).
func (g *Gateway) OnSettle(f func(Entry)) { g.ledger.Store(&f) }

// cost is how many requests one call to route counts for.
func (st *settings) cost(route string) int64 {
	if n, ok := st.routeCosts[route]; ok {
		return n
	}
	return 1
}

// Package httpapi is the Echo adapter of the gateway: routes, the
// authentication middleware, decoding a request into the gateway's steps
// (internal/gateway: Admit → Forward → Finish) and the one table that
// maps errors to a status, headers, a body and a metric reason.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/httpx"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// SignatureHeader carries a bypass signature (gateway.Sign).
const SignatureHeader = "X-Tollgate-Signature"

// Server serves the OpenAI- and Anthropic-compatible API, and the paid
// routes, through a gateway. Create it with New; it is an http.Handler.
type Server struct {
	echo    *echo.Echo
	gw      *gateway.Gateway
	log     *slog.Logger
	metrics *metrics.Metrics
	ready   func(context.Context) error
	guard   *authguard.Guard
	now     func() time.Time
}

// Options are the server's collaborators beside its gateway.
type Options struct {
	// Ready reports whether the gateway can serve (its store answers);
	// nil means always ready.
	Ready func(context.Context) error
	// Gatherer, if set, is served at GET /metrics.
	Gatherer prometheus.Gatherer
	// Guard locks out addresses that fail authentication; nil: one on the
	// gateway's engine, of the server's own.
	Guard *authguard.Guard
}

// New builds the server of gw: its routes, and those of the paid routes
// gw's config has (mounted once: a reload cannot move them).
func New(gw *gateway.Gateway, opts Options) *Server {
	if opts.Guard == nil {
		opts.Guard = authguard.New(gw.Engine())
	}
	s := &Server{gw: gw, log: gw.Log(), metrics: gw.Metrics(), ready: opts.Ready, guard: opts.Guard, now: time.Now}
	s.echo = s.routes(opts.Gatherer)
	for _, r := range gw.Settings().Config().PaidRoutes {
		handler := s.traced(s.authenticate(s.paid(r.Name, r.Prefix)))
		s.echo.Any(r.Prefix, handler)
		s.echo.Any(r.Prefix+"/*", handler)
	}
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Mount lets another package add routes (the admin API) to the router.
func (s *Server) Mount(f func(*echo.Echo)) { f(s.echo) }

func (s *Server) routes(gatherer prometheus.Gatherer) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		if s.ready != nil {
			if err := s.ready(c.Request().Context()); err != nil {
				return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	}
	// The /v1 routes are wrapped in tracing and authentication once, here:
	// a group's middleware (e.Group("/v1", mw...)) is applied by echo at
	// every request, two closures made per request. As such a group does,
	// unknown /v1 paths are authenticated before their 404.
	v1 := e.Group("/v1")
	guarded := func(h echo.HandlerFunc) echo.HandlerFunc { return s.traced(s.authenticate(h)) }
	v1.RouteNotFound("", guarded(echo.NotFoundHandler))
	v1.RouteNotFound("/*", guarded(echo.NotFoundHandler))
	for _, r := range []struct {
		path string
		ep   bound.Endpoint
	}{
		{"/v1/chat/completions", bound.Chat},
		{"/v1/completions", bound.Completions},
		{"/v1/embeddings", bound.Embeddings},
		{"/v1/messages", bound.Messages},
		{"/v1/responses", bound.Responses},
	} {
		v1.POST(strings.TrimPrefix(r.path, "/v1"), guarded(s.proxy(r.ep, r.path)))
	}
	v1.POST("/messages/count_tokens", guarded(s.countTokens))
	v1.GET("/models", guarded(s.listModels))
	v1.GET("/budget", guarded(s.ownBudget))
	return e
}

// authenticate resolves the API key (Authorization: Bearer, or x-api-key).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		key := httpx.Get(h, "X-Api-Key")
		if auth := httpx.Get(h, "Authorization"); auth != "" {
			scheme, token, ok := strings.Cut(auth, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return errBadKey
			}
			key = strings.TrimSpace(token)
		}
		st := s.gw.Settings()
		ip := authguard.ClientIP(c.Request(), st.Trusted())
		var p *policy.Principal
		ok := false
		if key != "" {
			_, end := s.span(c, "auth")
			if p, ok = s.gw.Lookup(st, key); ok {
				end(nil)
			} else {
				end(errBadKey)
			}
		}
		if !ok {
			// A locked-out address is refused what it cannot prove: a
			// key that verifies is served from it all the same (a healthy
			// app beside one retrying a stale key behind the same NAT),
			// and the keys are too long to guess however many tries an
			// address gets.
			if wait, locked := s.guard.Locked(c.Request().Context(), st.AuthFailures(), ip, s.now()); locked {
				s.metrics.Refusals.WithLabelValues("auth_failures", "ip", authguard.Name, "").Inc()
				return &authThrottled{retryAfter: wait}
			}
			if key == "" {
				return s.authFailed(c, st, ip, errNoKey)
			}
			return s.authFailed(c, st, ip, errBadKey)
		}
		// The whole request uses the settings its key was found in. They
		// ride on the context itself: echo's Set makes a map per request.
		if err := next(&authed{Context: c, principal: p, settings: st, ip: ip}); err != nil {
			return &keyedError{err: err, principal: p} // the error handler logs whose it was
		}
		return nil
	}
}

// keyedError is an error of an authenticated request, with its key's
// principal, for the error handler's log line (echo hands the handler
// the context before authentication).
type keyedError struct {
	err       error
	principal *policy.Principal
}

func (e *keyedError) Error() string { return e.err.Error() }
func (e *keyedError) Unwrap() error { return e.err }

// logError writes one line for every error answered: the route, the
// key and team where the request was authenticated, the status, the code
// and the field a 400 names — at Warn for the gateway's own failures
// (5xx), at Info for refusals, which are the gateway doing its job.
func (s *Server) logError(c echo.Context, err error, r refusal) {
	level := slog.LevelInfo
	if r.status >= 500 {
		level = slog.LevelWarn
	}
	req := c.Request()
	attrs := []slog.Attr{slog.String("request_id", c.Response().Header().Get("X-Tollgate-Request-Id")),
		slog.String("method", req.Method), slog.String("route", routeOf(c)), slog.Int("status", r.status), slog.String("code", r.body.Code)}
	if r.body.Param != nil {
		attrs = append(attrs, slog.String("param", *r.body.Param))
	}
	if r.scope != "" {
		attrs = append(attrs, slog.String("scope", r.scope), slog.String("limit", r.limit))
	}
	if info := r.body.Tollgate; info != nil {
		attrs = append(attrs, slog.Int64("estimate", info.Estimate), slog.Int64("remaining", info.Remaining), slog.String("unit", info.Unit))
	}
	var keyed *keyedError
	if errors.As(err, &keyed) && keyed.principal != nil {
		attrs = append(attrs, slog.String("org", keyed.principal.Org), slog.String("team", keyed.principal.Team), slog.String("key", keyed.principal.Key))
	}
	if r.status >= 500 || r.status == http.StatusBadRequest {
		attrs = append(attrs, slog.String("message", r.body.Message))
	}
	s.log.LogAttrs(req.Context(), level, "refused", attrs...)
}

// routeOf is the route c matched (/v1/chat/completions), or the path
// asked for where none did.
func routeOf(c echo.Context) string {
	if p := c.Path(); p != "" && !strings.HasSuffix(p, "/*") {
		return p
	}
	return c.Request().URL.Path
}

// authFailed counts a failed authentication against the client's IP: past
// the limit the address is locked out (429 with Retry-After) until the
// window ends, on every instance.
func (s *Server) authFailed(c echo.Context, st *gateway.Settings, ip string, err error) error {
	s.metrics.Refusals.WithLabelValues("unauthorized", "", "", "").Inc()
	if wait, locked := s.guard.Failed(c.Request().Context(), st.AuthFailures(), ip, s.now()); locked {
		s.metrics.Refusals.WithLabelValues("auth_failures", "ip", authguard.Name, "").Inc()
		s.log.Warn("too many failed authentications: address locked out", "client_ip", ip, "for", wait)
		return &authThrottled{retryAfter: wait}
	}
	return err
}

// authed is an authenticated request's context: its key's principal and
// the settings the key was found in.
type authed struct {
	echo.Context
	principal *policy.Principal
	settings  *gateway.Settings
	ip        string // the client's address, as authentication found it
}

func principalOf(c echo.Context) *policy.Principal {
	if a, ok := c.(*authed); ok {
		return a.principal
	}
	return nil
}

// clientIP is the client's address: as authentication found it, for an
// authenticated request.
func clientIP(c echo.Context, st *gateway.Settings) string {
	if a, ok := c.(*authed); ok {
		return a.ip
	}
	return authguard.ClientIP(c.Request(), st.Trusted())
}

func settingsOf(c echo.Context) *gateway.Settings {
	if a, ok := c.(*authed); ok {
		return a.settings
	}
	return nil
}

func (s *Server) listModels(c echo.Context) error {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range settingsOf(c).Models(principalOf(c)) {
		list.Data = append(list.Data, model{ID: m.Name, Object: "model", OwnedBy: m.Upstream})
	}
	return c.JSON(http.StatusOK, list)
}

// handleError writes every error a handler returns through the one error
// table.
func (s *Server) handleError(err error, c echo.Context) {
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
	r := mapError(err)
	h := c.Response().Header()
	gateway.WriteRetryAfter(h, r.retryAfter)
	switch {
	case r.noRetry:
		h.Set("X-Should-Retry", "false")
	case r.retry:
		h.Set("X-Should-Retry", "true")
	}
	if r.limits != nil {
		writeLimitHeaders(h, r.limits, *r.result, true)
	}
	s.logError(c, err, r)
	if strings.HasPrefix(c.Path(), "/v1/messages") {
		_ = c.JSON(r.status, anthropicError(r))
		return
	}
	_ = c.JSON(r.status, struct {
		Error apiError `json:"error"`
	}{r.body})
}

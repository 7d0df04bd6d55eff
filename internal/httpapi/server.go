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
		// A locked-out address is refused whatever it sends, the right
		// key included: guessing stops, not merely slows.
		ip := authguard.ClientIP(c.Request(), st.Trusted())
		if wait, locked := s.guard.Locked(c.Request().Context(), st.AuthFailures(), ip, s.now()); locked {
			s.metrics.Refusals.WithLabelValues("auth_failures", "ip", authguard.Name, "").Inc()
			return &authThrottled{retryAfter: wait}
		}
		if key == "" {
			return s.authFailed(c, st, ip, errNoKey)
		}
		_, end := s.span(c, "auth")
		p, ok := s.gw.Lookup(st, key)
		if !ok {
			end(errBadKey)
			return s.authFailed(c, st, ip, errBadKey)
		}
		end(nil)
		// The whole request uses the settings its key was found in. They
		// ride on the context itself: echo's Set makes a map per request.
		return next(&authed{Context: c, principal: p, settings: st, ip: ip})
	}
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
	if r.status >= 500 {
		s.log.Warn("refused", "status", r.status, "code", r.body.Code)
	}
	if strings.HasPrefix(c.Path(), "/v1/messages") {
		_ = c.JSON(r.status, anthropicError(r))
		return
	}
	_ = c.JSON(r.status, struct {
		Error apiError `json:"error"`
	}{r.body})
}

package httpapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream"
)

// call is one request on its way through the pipeline.
type call struct {
	id          string
	principal   *policy.Principal
	route       *modelRoute
	req         *upstream.Request
	prep        *upstream.Prepared
	estimate    budget.Amounts
	limits      []budget.Limit
	reservation *budget.Reservation
	// engine holds the reservation: the gateway's, or the local fallback.
	engine *budget.Engine
	// degraded names the mode that let the request through while the
	// store was unavailable; its spend is recorded as unreserved.
	degraded string
	start    time.Time
	// outcome is the request's result for the metrics: served, refused,
	// upstream_error, error or client_closed.
	outcome string
	// settings are the gateway's settings when the request arrived.
	settings *settings
	// served is the upstream that answered (a fallback, maybe).
	served *candidate
	// routePath is the gateway route, e.g. /v1/chat/completions.
	routePath string
	// model is the model asked for, or a paid route's name; upstream, on
	// a paid route, the upstream it goes to (an LLM request's is its
	// route's first candidate until one answers).
	model, upstream string
	// chargeReserved settles at the reservation itself (no usable usage).
	chargeReserved bool
	// bypass names who skipped the limits (a signing service, or an
	// unlimited key).
	bypass string
	// user is the end user the request was made for, if named.
	user string
	// reservedAt is when the budgets were charged: the time of the
	// request's ledger entry, so the entry falls in the period its spend
	// was charged to even when the answer ends in the next one.
	reservedAt time.Time
	// reserved is the store's answer to the reservation: each budget's
	// settled spend and pending then, for the alerts at settlement.
	reserved budget.Result
}

// entry is the ledger entry of cl as far as it is known before the
// upstream answers: what the sweeper records if it is never settled.
func (cl *call) entry() *Entry {
	e := &Entry{Time: cl.reservedAt, RequestID: cl.id, Org: cl.principal.Org, Team: cl.principal.Team, Key: cl.principal.Key,
		User: cl.user, Route: cl.routePath, Model: cl.model, Cost: cl.estimate.Cost, Reserved: cl.estimate.Cost,
		ReservedTokens: cl.estimate.Tokens, Usage: budget.Usage{Estimated: true}, Served: true, Bypass: cl.bypass, Upstream: cl.upstream}
	if cl.route != nil && len(cl.route.candidates) > 0 {
		e.Upstream = cl.route.candidates[0].target.name
	}
	return e
}

// proxy is the request path for one endpoint: parse and estimate, reserve
// against every limit at once, forward, stream back, settle.
func (g *Gateway) proxy(ep upstream.Endpoint, route string) echo.HandlerFunc {
	return func(c echo.Context) error {
		cl := &call{id: rand.Text()[:20], principal: principalOf(c), start: time.Now(), engine: g.engine, outcome: "error",
			settings: settingsOf(c), routePath: route}
		c.Response().Header().Set("X-Tollgate-Request-Id", cl.id)
		defer g.count(cl, route)
		body, err := readBody(c, cl.settings.maxBody)
		if err == nil {
			err = g.prepare(cl, ep, body)
		}
		if err != nil {
			cl.outcome = "refused"
			g.metrics.Refusals.WithLabelValues(reasonOf(err), "", "", cl.principal.Team).Inc()
			return err
		}
		cl.user = c.Request().Header.Get(cl.settings.userHeader)
		if cl.user == "" {
			cl.user = cl.req.User
		}
		cl.limits = cl.principal.Limits(policy.RequestKey{User: cl.user, Model: cl.model, Route: route, ID: cl.id,
			IP: authguard.ClientIP(c.Request(), cl.settings.trusted)})
		if err := g.bypass(c, cl, body); err != nil {
			cl.outcome = "refused"
			return err
		}
		res, admitted, err := g.admit(c, cl, route)
		if !admitted {
			return err
		}
		g.admitted(c, cl, res)
		usage, served, err := g.forward(c, cl)
		cl.outcome = g.outcomeOf(cl, served, err)
		ctx := c.Request().Context()
		g.afterResponse(func() { g.finish(ctx, cl, usage, served) })
		return err
	}
}

// bypass lets a signed request or an unlimited key past every limit: each
// still evaluates (and is charged where it fits) but none refuses, and
// the request is metered and priced as usual. A signature that does not
// verify is the error.
func (g *Gateway) bypass(c echo.Context, cl *call, body []byte) error {
	sig := c.Request().Header.Get(SignatureHeader)
	if sig == "" && !cl.principal.Unlimited() {
		return nil
	}
	who := "unlimited-key"
	if sig != "" {
		id, err := g.verifyBypass(c.Request().Context(), cl.settings.bypass, sig, c.Request().Method, c.Request().URL.RequestURI(), body, time.Now())
		if err != nil {
			g.log.Warn("bypass refused", "request_id", cl.id, "team", cl.principal.Team, "key", cl.principal.Key, "err", err)
			return err
		}
		who = id
	}
	cl.limits = shadowed(cl.limits)
	cl.bypass = who
	g.metrics.Bypasses.WithLabelValues(who, cl.principal.Team).Inc()
	g.log.Warn("limits bypassed", "request_id", cl.id, "by", who, "team", cl.principal.Team, "key", cl.principal.Key, "model", cl.model)
	return nil
}

// admit reserves cl's estimate against its limits: from the store, or as
// its route degrades while the store is unavailable; a budget that allows
// clamping is retried with the output cap that fits. A refusal is written
// here (admitted false, nil error); any other failure is the error.
func (g *Gateway) admit(c echo.Context, cl *call, route string) (res budget.Result, admitted bool, err error) {
	start := time.Now()
	cl.reservedAt = start
	var pre *Entry
	if g.engine.KeepsLedger() || g.ledger.Load() != nil {
		pre = cl.entry()
	}
	r, res, err := g.engine.ReserveFor(c.Request().Context(), cl.limits, cl.estimate, pre)
	g.metrics.StoreLatency.WithLabelValues("reserve").Observe(time.Since(start).Seconds())
	degraded := errors.Is(err, budget.ErrStoreUnavailable)
	if degraded {
		g.metrics.StoreErrors.WithLabelValues("reserve").Inc()
		r, res, err = g.degrade(c, cl, route, err)
	}
	var refused *budget.RefusedError
	if errors.As(err, &refused) && !degraded { // a local fallback's refusal is not clamped
		r, res, err = g.clamp(c, cl, refused, pre, r, res, err)
	}
	if err == nil {
		cl.reservation = r
		return res, true, nil
	}
	cl.outcome = "refused"
	if errors.As(err, &refused) {
		g.log.Info("refused", "request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team,
			"key", cl.principal.Key, "model", cl.model, "limit", refused.Limit.Bucket,
			"estimate_usd_micros", int64(cl.estimate.Cost))
		rf := g.refusalOf(cl, refused)
		g.metrics.Refusals.WithLabelValues(rf.reason, refused.Limit.Scope.String(), refused.Limit.Name, cl.principal.Team).Inc()
		if budget.IsBudgetRefusal(err) {
			g.alerts.refused(c.Request().Context(), cl, refused)
		}
		g.writeRefusal(c, rf, cl.limits)
		return res, false, nil
	}
	g.metrics.Refusals.WithLabelValues(reasonOf(err), "", "", cl.principal.Team).Inc()
	if !errors.Is(err, budget.ErrStoreUnavailable) {
		cl.outcome = "error"
		g.log.Error("reserving", "request_id", cl.id, "err", err)
	}
	return res, false, err
}

// clamp retries a request a budget refused with the largest output cap
// that fits, when the budget allows it; otherwise the refusal stands.
func (g *Gateway) clamp(c echo.Context, cl *call, refused *budget.RefusedError, pre *Entry,
	r *budget.Reservation, res budget.Result, err error) (*budget.Reservation, budget.Result, error) {
	if cl.prep == nil {
		return r, res, err // a paid route has no output cap to clamp
	}
	requested := cl.prep.OutputCap
	k := g.clampable(cl, refused)
	if k <= 0 {
		return r, res, err
	}
	if pre != nil {
		pre = cl.entry()
	}
	r, res, err = g.engine.ReserveFor(c.Request().Context(), cl.limits, cl.estimate, pre)
	if err == nil {
		c.Response().Header().Set("X-Tollgate-Output-Clamped", fmt.Sprintf("%s=%d; requested=%d", cl.req.CapField(), k, requested))
		g.log.Info("clamped to fit a budget", "request_id", cl.id, "team", cl.principal.Team, "limit", refused.Limit.Bucket,
			"requested", requested, "granted", k)
	}
	return r, res, err
}

// admitted records what an admitted request's reservation found: shadow
// limits that would have refused, budget utilisation, alerts, and the
// limit headers of the response.
func (g *Gateway) admitted(c echo.Context, cl *call, res budget.Result) {
	for _, i := range res.Shadowed {
		l := &cl.limits[i]
		g.metrics.ShadowRefusals.WithLabelValues(l.Scope.String(), l.Name, cl.principal.Team).Inc()
		g.log.Info("shadow limit would have refused", "request_id", cl.id, "team", cl.principal.Team,
			"key", cl.principal.Key, "model", cl.model, "limit", l.Bucket, "estimate_usd_micros", int64(cl.estimate.Cost))
	}
	g.observeBudgets(cl, res)
	cl.reserved = res
	g.alerts.check(c.Request().Context(), cl, res)
	writeLimitHeaders(c.Response().Header(), cl.limits, res)
}

// outcomeOf names how the upstream exchange ended, for the metrics.
func (g *Gateway) outcomeOf(cl *call, served bool, err error) string {
	var upErr *upstreamRefused
	switch {
	case served:
		return "served"
	case errors.Is(err, errClientCanceled):
		return "client_closed"
	case errors.As(err, &upErr):
		g.metrics.Refusals.WithLabelValues(upErr.code, "upstream", "", cl.principal.Team).Inc()
		return "refused"
	}
	return "upstream_error"
}

// degrade decides a request while the store is unavailable, as its route
// is configured: refuse (fail_closed), let it through without a
// reservation (fail_open), or reserve from a local bucket holding this
// instance's share of each limit (local_fallback). Every decision is logged
// and counted; the spend of a request let through is recorded when the
// store answers again.
func (g *Gateway) degrade(c echo.Context, cl *call, route string, storeErr error) (*budget.Reservation, budget.Result, error) {
	mode := cl.settings.onUnavailable[route]
	if mode == "" {
		mode = "fail_closed"
	}
	g.metrics.StoreUnavailable.WithLabelValues(mode, route).Inc()
	switch mode {
	case "fail_open":
		g.countDegraded(mode)
		g.log.Warn("budget store unavailable: failing open", "request_id", cl.id, "route", route, "team", cl.principal.Team, "err", storeErr)
		cl.degraded = mode
		return nil, budget.Result{Decider: -1}, nil
	case "local_fallback":
		local := make([]budget.Limit, len(cl.limits))
		for i, l := range cl.limits {
			l.Amount = max(1, l.Amount/cl.settings.instances)
			if l.Burst > 0 {
				l.Burst = max(1, l.Burst/cl.settings.instances)
			}
			local[i] = l
		}
		r, res, err := g.fallback.Reserve(c.Request().Context(), local, cl.estimate)
		if err == nil {
			g.countDegraded(mode)
			g.log.Warn("budget store unavailable: reserved from the local fallback", "request_id", cl.id, "route", route, "team", cl.principal.Team, "err", storeErr)
			cl.degraded, cl.engine, cl.limits = mode, g.fallback, local
		}
		return r, res, err
	}
	g.log.Warn("budget store unavailable: failing closed", "request_id", cl.id, "route", route, "err", storeErr)
	return nil, budget.Result{Decider: -1}, storeErr
}

// readBody reads the whole body up to max bytes, within the body deadline
// of the settings in force (see paceBody).
func readBody(c echo.Context, max int64) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > max {
		return nil, errTooLarge
	}
	st := settingsOf(c)
	var src io.Reader = r.Body
	if st != nil && st.cfg != nil {
		src = paceBody(c.Response(), r.Body, st.cfg.Server, time.Now())
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), io.NopCloser(src), max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooLarge):
			return nil, errTooLarge
		case errors.As(err, &ne) && ne.Timeout():
			return nil, errBodyTimeout
		}
		return nil, errClientCanceled
	}
	return body, nil
}

// prepare parses and estimates the request: the model must be priced and
// allowed for the key, and the body is rewritten so the estimate bounds it.
func (g *Gateway) prepare(cl *call, ep upstream.Endpoint, body []byte) error {
	req, err := upstream.ParseRequest(ep, body)
	if err != nil {
		return err
	}
	route, ok := cl.settings.models[req.Model]
	if !ok {
		return &modelError{model: req.Model}
	}
	if !cl.principal.Allows(req.Model) {
		return &modelError{model: req.Model, allowed: true}
	}
	if !route.candidates[0].target.provider.Serves(ep) {
		want := "/v1/chat/completions"
		if route.candidates[0].target.provider.Serves(upstream.Messages) {
			want = "/v1/messages"
		}
		return &upstream.RequestError{Param: "model", Message: fmt.Sprintf("%s is served by an upstream that speaks another API; call %s", req.Model, want)}
	}
	prep, err := req.Prepare(&route.model)
	if err != nil {
		return err
	}
	cl.req, cl.route, cl.prep, cl.model = req, route, prep, req.Model
	// Any candidate upstream may serve it: reserve at the dearest.
	if cl.estimate, err = cl.amountsFor(prep.MaxOutputTokens); err != nil {
		return &upstream.RequestError{Message: "the request is too large to price"}
	}
	return nil
}

// finish settles the reservation: what the upstream reported, or nothing
// when it did not serve the request. It runs after the response is written
// and survives the client going away.
func (g *Gateway) finish(ctx context.Context, cl *call, u budget.Usage, served bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	actual := budget.Amounts{}
	if served {
		cost, err := cl.served.price.Cost(u)
		if cl.chargeReserved {
			cost, err = cl.estimate.Cost, nil
		}
		if err != nil {
			// Usage we cannot price is charged at the reservation: over,
			// never under.
			g.log.Warn("pricing reported usage", "request_id", cl.id, "err", err)
			cost, u.Estimated = cl.estimate.Cost, true
		}
		actual = budget.Amounts{Tokens: u.TotalTokens(), Requests: cl.estimate.Requests, Cost: cost}
	}
	e := cl.entry()
	e.Usage, e.Cost, e.Served, e.Degraded = u, actual.Cost, served, cl.degraded
	e.Upstream = ""
	if cl.served != nil {
		e.Upstream = cl.served.target.name
	}
	outcome := g.settle(ctx, cl, e, actual)
	if served {
		g.observeUsage(cl, u, actual)
	}
	g.log.Info("request",
		"request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team, "key", cl.principal.Key,
		"model", cl.model, "stream", cl.req.Stream, "reservation", e.ReservationID, "outcome", outcome.String(), "degraded", cl.degraded, "bypass", cl.bypass,
		"served", served, "estimate_usd_micros", int64(cl.estimate.Cost), "actual_usd_micros", int64(actual.Cost),
		"input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "usage_estimated", u.Estimated,
		"duration_ms", time.Since(cl.start).Milliseconds())
}

// settle charges cl's reservation the actual amounts and hands the ledger
// its entry e (the reservation's id, outcome and, for a settlement that
// corrected a sweep, the difference filled in); spend let through while
// the store was unavailable is recorded for when it answers. It is the
// one settlement step of LLM and paid routes.
func (g *Gateway) settle(ctx context.Context, cl *call, e *Entry, actual budget.Amounts) budget.Outcome {
	var outcome budget.Outcome
	if cl.reservation != nil {
		g.holds.observe(time.Since(cl.reservedAt))
		e.ReservationID = cl.reservation.ID
		start := time.Now()
		var err error
		outcome, err = cl.engine.SettleEntry(ctx, cl.reservation, actual, e)
		g.metrics.StoreLatency.WithLabelValues("settle").Observe(time.Since(start).Seconds())
		if err != nil {
			g.metrics.StoreErrors.WithLabelValues("settle").Inc()
			g.log.Error("settling", "request_id", cl.id, "reservation", e.ReservationID, "err", err)
		}
	}
	if outcome == budget.Settled || outcome == budget.Corrected {
		g.alerts.settled(ctx, cl, actual)
	}
	if cl.degraded != "" && e.Served {
		// Spend made while the store was away is charged to it when it
		// answers again (the store spools it until then), with its ledger
		// entry, to the periods in force now.
		e.Time = time.Now()
		if err := g.engine.RecordUnreserved(ctx, cl.limits, actual, e); err != nil {
			g.log.Error("recording spend made while the store was unavailable", "request_id", cl.id, "err", err)
		}
	}
	e.Outcome = outcome.String()
	if outcome == budget.Corrected {
		// The ledger has the sweep's entry, charged at the reservation:
		// this one carries the difference.
		*e = budget.CorrectionOf(*e)
	}
	if f := g.ledger.Load(); f != nil {
		(*f)(*e)
	}
	return outcome
}

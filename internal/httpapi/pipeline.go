package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/queue"
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
		User: cl.user, Route: cl.routePath, Model: cl.req.Model, Cost: cl.estimate.Cost, Reserved: cl.estimate.Cost,
		ReservedTokens: cl.estimate.Tokens, Usage: budget.Usage{Estimated: true}, Served: true, Bypass: cl.bypass}
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
		if err != nil {
			cl.outcome = "refused"
			g.metrics.Refusals.WithLabelValues(reasonOf(err), "", "", cl.principal.Team).Inc()
			return err
		}
		if err := g.prepare(cl, ep, body); err != nil {
			cl.outcome = "refused"
			g.metrics.Refusals.WithLabelValues(reasonOf(err), "", "", cl.principal.Team).Inc()
			return err
		}
		user := c.Request().Header.Get(cl.settings.userHeader)
		if user == "" {
			user = cl.req.User
		}
		cl.user = user
		limits := cl.principal.Limits(policy.RequestKey{User: user, Model: cl.req.Model, Route: route, ID: cl.id,
			IP: authguard.ClientIP(c.Request(), cl.settings.trusted)})
		if sig := c.Request().Header.Get(SignatureHeader); sig != "" || cl.principal.Unlimited() {
			who := "unlimited-key"
			if sig != "" {
				id, err := g.verifyBypass(c.Request().Context(), cl.settings.bypass, sig, c.Request().Method, c.Request().URL.RequestURI(), body, time.Now())
				if err != nil {
					cl.outcome = "refused"
					g.log.Warn("bypass refused", "request_id", cl.id, "team", cl.principal.Team, "key", cl.principal.Key, "err", err)
					return err
				}
				who = id
			}
			// Every limit still evaluates (and is charged where it fits)
			// but none refuses; the request is metered and priced as usual.
			limits = shadowed(limits)
			cl.bypass = who
			g.metrics.Bypasses.WithLabelValues(who, cl.principal.Team).Inc()
			g.log.Warn("limits bypassed", "request_id", cl.id, "by", who, "team", cl.principal.Team, "key", cl.principal.Key, "model", cl.req.Model)
		}
		cl.limits = limits
		start := time.Now()
		cl.reservedAt = start
		var pre *Entry
		if g.engine.KeepsLedger() || g.ledger.Load() != nil {
			pre = cl.entry()
		}
		r, res, err := g.engine.ReserveFor(c.Request().Context(), limits, cl.estimate, pre)
		g.metrics.StoreLatency.WithLabelValues("reserve").Observe(time.Since(start).Seconds())
		degraded := errors.Is(err, budget.ErrStoreUnavailable)
		if degraded {
			g.metrics.StoreErrors.WithLabelValues("reserve").Inc()
			r, res, err = g.degrade(c, cl, route, err)
		}
		var refused *budget.RefusedError
		if errors.As(err, &refused) && !degraded { // a local fallback's refusal is not clamped
			requested := cl.prep.OutputCap
			if k := g.clampable(cl, refused); k > 0 {
				if pre != nil {
					pre = cl.entry()
				}
				r, res, err = g.engine.ReserveFor(c.Request().Context(), limits, cl.estimate, pre)
				if err == nil {
					c.Response().Header().Set("X-Tollgate-Output-Clamped", fmt.Sprintf("%s=%d; requested=%d", cl.req.CapField(), k, requested))
					g.log.Info("clamped to fit a budget", "request_id", cl.id, "team", cl.principal.Team, "limit", refused.Limit.Bucket,
						"requested", requested, "granted", k)
				}
			}
		}
		if err != nil {
			cl.outcome = "refused"
			if errors.As(err, &refused) {
				g.log.Info("refused", "request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team,
					"key", cl.principal.Key, "model", cl.req.Model, "limit", refused.Limit.Bucket,
					"estimate_usd_micros", int64(cl.estimate.Cost))
				rf := g.refusalOf(cl, refused)
				g.metrics.Refusals.WithLabelValues(rf.reason, refused.Limit.Scope.String(), refused.Limit.Name, cl.principal.Team).Inc()
				if budget.IsBudgetRefusal(err) {
					g.alerts.refused(c.Request().Context(), cl, refused)
				}
				g.writeRefusal(c, rf, cl.limits)
				return nil
			}
			g.metrics.Refusals.WithLabelValues(reasonOf(err), "", "", cl.principal.Team).Inc()
			if !errors.Is(err, budget.ErrStoreUnavailable) {
				cl.outcome = "error"
				g.log.Error("reserving", "request_id", cl.id, "err", err)
			}
			return err
		}
		cl.reservation = r
		for _, i := range res.Shadowed {
			l := &cl.limits[i]
			g.metrics.ShadowRefusals.WithLabelValues(l.Scope.String(), l.Name, cl.principal.Team).Inc()
			g.log.Info("shadow limit would have refused", "request_id", cl.id, "team", cl.principal.Team,
				"key", cl.principal.Key, "model", cl.req.Model, "limit", l.Bucket, "estimate_usd_micros", int64(cl.estimate.Cost))
		}
		g.observeBudgets(cl, res)
		cl.reserved = res
		g.alerts.check(c.Request().Context(), cl, res)
		writeLimitHeaders(c.Response().Header(), cl.limits, res)
		usage, served, err := g.forward(c, cl)
		var upErr *upstreamRefused
		switch {
		case served:
			cl.outcome = "served"
		case errors.Is(err, errClientCanceled):
			cl.outcome = "client_closed"
		case errors.As(err, &upErr):
			cl.outcome = "refused"
			g.metrics.Refusals.WithLabelValues(upErr.code, "upstream", "", cl.principal.Team).Inc()
		default:
			cl.outcome = "upstream_error"
		}
		ctx := c.Request().Context()
		g.afterResponse(func() { g.finish(ctx, cl, usage, served) })
		return err
	}
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
	if anthropic := route.candidates[0].target.kind == "anthropic"; anthropic != (ep == upstream.Messages) {
		want := "/v1/chat/completions"
		if anthropic {
			want = "/v1/messages"
		}
		return &upstream.RequestError{Param: "model", Message: fmt.Sprintf("%s is served by an upstream that speaks another API; call %s", req.Model, want)}
	}
	prep, err := req.Prepare(&route.model)
	if err != nil {
		return err
	}
	cl.req, cl.route, cl.prep = req, route, prep
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
	if served {
		g.observeUsage(cl, u, actual)
	}
	if outcome == budget.Settled || outcome == budget.Corrected {
		g.alerts.settled(ctx, cl, actual)
	}
	if cl.degraded != "" && served {
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
	resID := e.ReservationID
	g.log.Info("request",
		"request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team, "key", cl.principal.Key,
		"model", cl.req.Model, "stream", cl.req.Stream, "reservation", resID, "outcome", outcome.String(), "degraded", cl.degraded, "bypass", cl.bypass,
		"served", served, "estimate_usd_micros", int64(cl.estimate.Cost), "actual_usd_micros", int64(actual.Cost),
		"input_tokens", u.InputTokens, "output_tokens", u.OutputTokens, "usage_estimated", u.Estimated,
		"duration_ms", time.Since(cl.start).Milliseconds())
}

// maxResponseBytes bounds a non-streaming response the gateway buffers to
// read its usage; past it the rest is streamed through and the request is
// charged at its reservation.
const maxResponseBytes = 32 << 20

// forwarded request headers; everything else the client sent (its key,
// cookies, internal headers) stays at the gateway.
var forwardHeaders = []string{"Accept", "User-Agent", "OpenAI-Beta"}

// returned response headers; the upstream's own rate-limit headers and
// organisation would describe Tollgate's account, not the client's limits.
var returnHeaders = []string{"Content-Type", "Cache-Control", "X-Request-Id", "Openai-Processing-Ms", "Openai-Version", "Request-Id"}

// upstreamRefused is a request no candidate upstream would take: every
// breaker open (or backing off), every queue full or timed out.
type upstreamRefused struct {
	code       string
	retryAfter time.Duration
}

func (e *upstreamRefused) Error() string { return "httpapi: upstream refused: " + e.code }

// forward sends the prepared request to the first candidate upstream that
// takes it — its breaker closed, its queue admitting it — and writes the
// answer to the client. served is false when no upstream served the
// request (refusals, error statuses, no answer); usage is then meaningless.
func (g *Gateway) forward(c echo.Context, cl *call) (u budget.Usage, served bool, err error) {
	ctx := c.Request().Context()
	refused := &upstreamRefused{}
	skipped := ""
	for _, cand := range cl.route.candidates {
		t := cand.target
		done, ra, err := t.breaker.Allow()
		if err != nil {
			refused.note(map[bool]string{true: "upstream_backing_off", false: "upstream_circuit_open"}[errors.Is(err, breaker.ErrBackoff)], ra)
			skipped = t.name
			continue
		}
		release := func() {}
		if t.queue != nil {
			start := time.Now()
			g.metrics.QueueDepth.WithLabelValues(t.name).Set(float64(t.queue.Len() + 1))
			rel, ra, err := t.queue.Wait(ctx, cl.principal.Team, cl.estimate.Tokens)
			g.metrics.QueueDepth.WithLabelValues(t.name).Set(float64(t.queue.Len()))
			result := "admitted"
			switch {
			case errors.Is(err, queue.ErrFull):
				result = "full"
			case errors.Is(err, queue.ErrDeadline):
				result = "timeout"
			case err != nil:
				result = "cancelled"
			}
			g.metrics.QueueWait.WithLabelValues(t.name, result).Observe(time.Since(start).Seconds())
			if err != nil {
				done(context.Canceled) // not the upstream's doing
				if ctx.Err() != nil {
					return u, false, errClientCanceled
				}
				refused.note(map[bool]string{true: "upstream_queue_full", false: "upstream_queue_timeout"}[errors.Is(err, queue.ErrFull)], ra)
				skipped = t.name
				continue
			}
			release = rel
		}
		if skipped != "" {
			g.metrics.Fallbacks.WithLabelValues(skipped, t.name).Inc()
		}
		cl.served = &cand
		u, served, failure, err := g.exchange(c, cl, t)
		release()
		done(failure)
		return u, served, err
	}
	g.log.Warn("no upstream took the request", "request_id", cl.id, "model", cl.req.Model, "reason", refused.code)
	return u, false, refused
}

// note keeps the refusal that lets the client retry soonest.
func (e *upstreamRefused) note(code string, ra time.Duration) {
	if e.code == "" || ra < e.retryAfter {
		e.code, e.retryAfter = code, ra
	}
}

// exchange sends the request to t and relays the answer. failure is what
// t's breaker is told: nil for an answer (4xx included), breaker.ErrFailed
// for connection errors, timeouts, 5xx and 429, context.Canceled when the
// client left.
func (g *Gateway) exchange(c echo.Context, cl *call, t *target) (u budget.Usage, served bool, failure, err error) {
	ctx, cancel := context.WithTimeout(c.Request().Context(), t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(cl.req.Endpoint, cl.req.Model), bytes.NewReader(cl.prep.Body))
	if err != nil {
		return u, false, nil, err
	}
	for _, k := range forwardHeaders {
		if v := c.Request().Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if t.kind == "anthropic" {
		version := c.Request().Header.Get("Anthropic-Version")
		if version == "" {
			version = "2023-06-01"
		}
		req.Header.Set("Anthropic-Version", version)
		if beta := c.Request().Header.Get("Anthropic-Beta"); beta != "" {
			req.Header.Set("Anthropic-Beta", beta)
		}
		if t.apiKey != "" {
			req.Header.Set("X-Api-Key", t.apiKey)
		}
	} else if t.kind == "azure" && t.apiKey != "" {
		req.Header.Set("Api-Key", t.apiKey)
	} else if t.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.apiKey)
	}
	sent := time.Now()
	defer func() { g.metrics.UpstreamLatency.WithLabelValues(t.name).Observe(time.Since(sent).Seconds()) }()
	resp, err := t.client.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case c.Request().Context().Err() != nil:
			return u, false, context.Canceled, errClientCanceled
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			return u, false, breaker.ErrFailed, errUpstreamTime
		}
		g.log.Warn("upstream unreachable", "request_id", cl.id, "upstream", t.name, "err", err)
		return u, false, breaker.ErrFailed, errUpstream
	}
	defer resp.Body.Close()
	g.metrics.UpstreamTTFB.WithLabelValues(t.name).Observe(time.Since(sent).Seconds())

	h := c.Response().Header()
	for _, k := range returnHeaders {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("X-Tollgate-Upstream", t.name)
	if resp.StatusCode != http.StatusOK {
		// The upstream refused or failed: pass its answer through and
		// charge nothing (providers do not bill failed requests).
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			failure = breaker.ErrFailed
			if ra := parseRetryAfter(resp.Header); ra > 0 {
				t.breaker.Backoff(ra)
				writeRetryAfter(h, ra)
			}
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		c.Response().WriteHeader(resp.StatusCode)
		_, _ = c.Response().Write(body)
		return u, false, failure, nil
	}
	if cl.req.Stream && isEventStream(resp.Header.Get("Content-Type")) {
		body := newIdleReader(resp.Body, t.idle, cancel)
		defer body.stop()
		u := g.stream(c, cl, body, cancel)
		if body.fired() {
			g.log.Warn("upstream stream stalled past its idle timeout", "request_id", cl.id, "upstream", t.name, "idle", t.idle)
			return u, true, breaker.ErrFailed, nil
		}
		return u, true, nil, nil
	}
	return g.copyJSON(c, cl, resp), true, nil, nil
}

// parseRetryAfter reads Retry-After-Ms or Retry-After (seconds or a date).
func parseRetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseInt(h.Get("Retry-After-Ms"), 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return time.Until(at)
	}
	return 0
}

func isEventStream(ct string) bool { return len(ct) >= 17 && ct[:17] == "text/event-stream" }

// copyJSON relays a non-streaming answer and reads its usage.
func (g *Gateway) copyJSON(c echo.Context, cl *call, resp *http.Response) budget.Usage {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	w := c.Response()
	if err == nil && len(body) <= maxResponseBytes {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		w.Flush() // the client has its answer before the settlement runs
		usage := upstream.UsageFromJSON
		switch cl.req.Endpoint {
		case upstream.Messages:
			usage = upstream.UsageFromAnthropicJSON
		case upstream.Responses:
			usage = upstream.UsageFromResponsesJSON
		}
		if u, ok := usage(body); ok {
			return u
		}
		g.log.Warn("upstream reported no usage; charging the reservation", "request_id", cl.id)
		return cl.reservedUsage()
	}
	// Too large to buffer, or cut short: relay what there is, charge in full.
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	if err == nil {
		_, _ = io.Copy(w, resp.Body)
	}
	return cl.reservedUsage()
}

// reservedUsage is the reservation's own upper bound, marked estimated; the
// request is then charged exactly what was reserved.
func (cl *call) reservedUsage() budget.Usage {
	cl.chargeReserved = true
	return budget.Usage{InputTokens: cl.prep.InputTokens, OutputTokens: cl.prep.MaxOutputTokens, Estimated: true}
}

// stream relays an SSE answer event by event, flushing each at once. It
// keeps the last usage reported; the usage-only chunk the gateway asked for
// is dropped when the client did not ask for it. A stream that ends without
// usage (cut short, client gone) is charged for its input estimate and the
// output the gateway saw, counted with the model's tokenizer.
func (g *Gateway) stream(c echo.Context, cl *call, body io.Reader, cancel func()) budget.Usage {
	w := c.Response()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()

	maxText := int(min(cl.prep.MaxOutputTokens, 1<<22)) * 16
	meter := upstream.NewStreamMeter(maxText)
	switch cl.req.Endpoint {
	case upstream.Messages:
		meter = upstream.NewAnthropicStreamMeter(maxText)
	case upstream.Responses:
		meter = upstream.NewResponsesStreamMeter(maxText)
	}
	events := upstream.NewEventReader(body)
	bound := cl.prep.MaxOutputTokens
	var counted int64 // output tokens counted so far, from countedBytes of text
	countedBytes := 0
	lastExtend := time.Now()
	for {
		raw, data, err := events.Next()
		if len(raw) > 0 {
			usageOnly, perr := meter.Observe(data)
			if perr != nil {
				g.log.Warn("malformed stream event", "request_id", cl.id, "err", perr)
			}
			// Mid-stream metering: a token is at least a byte, so counting
			// starts only once the text could have reached the bound; then
			// each new piece is counted as it passes.
			if text := meter.Text(); len(text) >= int(bound) && len(text) > countedBytes {
				counted += cl.route.model.Counter.Count(text[countedBytes:])
				countedBytes = len(text)
				if counted > bound || meter.Truncated() {
					g.endOverrun(w, cl, counted)
					cancel()
					return cl.reservedUsage()
				}
			}
			if !usageOnly || cl.prep.ClientWantsUsage {
				if _, werr := w.Write(raw); werr != nil {
					break // the client went away; the upstream is cancelled with its context
				}
				if events.Buffered() == 0 {
					w.Flush()
				}
			}
		}
		if err != nil {
			w.Flush()
			if !errors.Is(err, io.EOF) {
				g.log.Warn("stream ended early", "request_id", cl.id, "err", err)
			}
			break
		}
		if time.Since(lastExtend) > cl.settings.lease/3 {
			lastExtend = time.Now()
			if cl.reservation == nil {
				continue
			}
			if err := cl.engine.Extend(context.WithoutCancel(c.Request().Context()), cl.reservation); err != nil {
				g.log.Warn("extending lease", "request_id", cl.id, "err", err)
			}
		}
	}
	if u, ok := meter.Usage(); ok {
		return u
	}
	out := bound
	if !meter.Truncated() {
		out = min(out, cl.route.model.Counter.Count(meter.Text()))
	}
	return budget.Usage{InputTokens: cl.prep.InputTokens, OutputTokens: out, Estimated: true}
}

// endOverrun ends a stream whose upstream went past the output bound the
// gateway reserved (it ignored max_tokens): a final error event, then
// [DONE]. The request is settled at its reservation.
func (g *Gateway) endOverrun(w *echo.Response, cl *call, counted int64) {
	g.log.Warn("upstream passed the reserved output bound; stream ended", "request_id", cl.id, "model", cl.req.Model,
		"bound", cl.prep.MaxOutputTokens, "counted", counted)
	g.metrics.StreamsCut.WithLabelValues(cl.req.Model).Inc()
	msg := fmt.Sprintf("The upstream passed the %d output tokens reserved for this request; the gateway ended the stream.", cl.prep.MaxOutputTokens)
	switch cl.req.Endpoint {
	case upstream.Messages:
		_, _ = fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":%q,\"code\":\"output_limit_reached\"}}\n\n", msg)
	case upstream.Responses:
		_, _ = fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"code\":\"output_limit_reached\",\"message\":%q,\"param\":null}\n\n", msg)
	default:
		_, _ = fmt.Fprintf(w, "data: {\"error\":{\"message\":%q,\"type\":\"server_error\",\"code\":\"output_limit_reached\"}}\n\ndata: [DONE]\n\n", msg)
	}
	w.Flush()
}

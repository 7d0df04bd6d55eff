package gateway

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Admit is the sequence's first step for an LLM endpoint: read the body,
// parse and estimate it (the model must be priced and allowed for the
// key, and the body is rewritten so the estimate bounds it), pick the
// request's limits, let a bypass past them, and reserve the estimate
// against all of them at once. The call is returned whatever happens, for
// Done; on error nothing is reserved and the error says why (a *Refused
// for a limit's refusal).
func (g *Gateway) Admit(ctx context.Context, ep bound.Endpoint, req Request) (*Call, error) {
	cl := g.begin(req)
	_, end := g.span(ctx, "estimate")
	body, err := req.Body()
	if err == nil {
		err = g.prepare(cl, ep, body)
	}
	end(err)
	if err != nil {
		cl.outcome = "refused"
		return cl, err
	}
	if cl.user == "" {
		cl.user = cl.llm.User
	}
	cl.limits = cl.principal.Limits(policy.RequestKey{User: cl.user, Model: cl.model, Route: req.Route, ID: cl.id, IP: req.IP})
	return cl, g.admit(ctx, cl, body)
}

func (g *Gateway) begin(req Request) *Call {
	return &Call{req: req, id: req.ID, principal: req.Principal, settings: req.Settings, start: g.now(), engine: g.engine,
		outcome: "error", user: req.User, intn: g.intn}
}

// admit is what every route does once its estimate and limits are known:
// bypass, reserve, and record what the reservation found.
func (g *Gateway) admit(ctx context.Context, cl *Call, body []byte) (err error) {
	ctx, end := g.span(ctx, "reserve")
	defer func() { end(err) }()
	if g.admitting != nil {
		if err := g.admitting(); err != nil {
			cl.outcome = "refused"
			return err
		}
	}
	if err := g.bypass(ctx, cl, body); err != nil {
		cl.outcome = "refused"
		return err
	}
	res, err := g.reserve(ctx, cl)
	if err != nil {
		return err
	}
	g.admitted(ctx, cl, res)
	return nil
}

// prepare reads and bounds the request: the model (or alias) must be
// priced and allowed for the key, and the body is prepared for each
// deployment that may serve it, so that its bound holds there.
func (g *Gateway) prepare(cl *Call, ep bound.Endpoint, body []byte) error {
	req, err := bound.Parse(ep, body, cl.req.Header)
	if err != nil {
		return err
	}
	r, ok := cl.settings.routes[req.Model]
	if !ok {
		return &ModelError{Model: req.Model}
	}
	if !cl.principal.Allows(req.Model) {
		return &ModelError{Model: req.Model, Allowed: true}
	}
	if cl.plans, err = planFor(req, r, cl.plans0[:0], &cl.plan0); err != nil {
		return err
	}
	cl.llm, cl.route, cl.model = req, r, req.Model
	// Any deployment may serve it: reserve at the dearest.
	if cl.estimate, err = cl.estimateAt(0); err != nil {
		var re *bound.RequestError
		if errors.As(err, &re) {
			return re // a price the request needs and the model lacks
		}
		return &bound.RequestError{Message: "the request is too large to price"}
	}
	return nil
}

// planFor prepares req for every deployment of r that can take it: one
// whose model accepts the request (its output cap within the model's, its
// images priced, its fields known there). Deployments with the same model
// and dialect share one preparation. The error is the first deployment's
// when none can. The plans are appended to buf; the first is made in
// spare, if not nil.
func planFor(req *bound.Request, r *route, buf []*plan, spare *plan) ([]*plan, error) {
	plans := buf
	newPlan := func(p plan) *plan {
		if q := spare; q != nil {
			*q, spare = p, nil
			return q
		}
		q := new(plan)
		*q = p
		return q
	}
	var first error
	for _, d := range r.deployments {
		var prep *bound.Prepared
		if i := slices.IndexFunc(plans, func(p *plan) bool {
			return p.dep.model.SameRequest(&d.model) && p.dep.target.provider.Kind() == d.target.provider.Kind()
		}); i >= 0 {
			prep = plans[i].prep
		} else {
			var err error
			if prep, err = req.Prepare(&d.model, d.target.provider); err != nil {
				first = cmp.Or(first, err)
				continue
			}
		}
		price, err := prep.Price(d.price)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		plans = append(plans, newPlan(plan{dep: d, req: req, prep: prep, price: price}))
	}
	if len(plans) == 0 {
		return nil, first
	}
	return plans, nil
}

// reserve takes cl's estimate from its limits: from the store, or as its
// route degrades while the store is unavailable; a budget that allows
// clamping is retried with the output cap that fits. A limit's refusal is
// a *Refused.
func (g *Gateway) reserve(ctx context.Context, cl *Call) (budget.Result, error) {
	start := g.now()
	cl.reservedAt = start
	var pre *budget.Entry
	if g.engine.KeepsLedger() || g.ledger.Load() != nil {
		pre = cl.entry()
	}
	r, res, err := g.engine.ReserveFor(ctx, cl.limits, cl.estimate, pre)
	g.metrics.ReserveLatency.Observe(g.now().Sub(start).Seconds())
	degraded := errors.Is(err, budget.ErrStoreUnavailable)
	if degraded {
		g.metrics.StoreErrors.WithLabelValues("reserve").Inc()
		r, res, err = g.degrade(ctx, cl, err)
	}
	if err != nil && !degraded { // a local fallback's refusal is not clamped
		r, res, err = g.clampRefused(ctx, cl, pre, r, res, err)
	}
	if err == nil {
		cl.reservation = r
		return res, nil
	}
	cl.outcome = "refused"
	var refused *budget.RefusedError
	if errors.As(err, &refused) {
		if !degraded {
			// A refusal reads the budgets as they are, so the gauges show
			// spend that settled past a ceiling. (A local fallback's
			// buckets are a share of them: not theirs to report.)
			g.observeBudgets(cl, refused.Result)
		}
		// (The one log line of the refusal is the HTTP adapter's.)
		out := g.refusalOf(cl, refused)
		if budget.IsBudgetRefusal(err) {
			g.alerts.refused(ctx, cl, refused)
			g.alerts.blocked(ctx, cl, refused, out.Fit)
		}
		return res, out
	}
	if !errors.Is(err, budget.ErrStoreUnavailable) {
		cl.outcome = "error"
		g.log.Error("reserving", "request_id", cl.id, "err", err)
	}
	return res, err
}

// clampRefused is clamp for a refusal err, where it is one. (Apart from
// reserve: the variable errors.As is given lives on the heap, made where
// it is declared, and reserve's success path should not pay for it.)
func (g *Gateway) clampRefused(ctx context.Context, cl *Call, pre *budget.Entry,
	r *budget.Reservation, res budget.Result, err error) (*budget.Reservation, budget.Result, error) {
	var refused *budget.RefusedError
	if !errors.As(err, &refused) {
		return r, res, err
	}
	return g.clamp(ctx, cl, refused, pre, r, res, err)
}

// clamp retries a request a budget refused with the largest output cap
// that fits, when the budget allows it; otherwise the refusal stands.
func (g *Gateway) clamp(ctx context.Context, cl *Call, refused *budget.RefusedError, pre *budget.Entry,
	r *budget.Reservation, res budget.Result, err error) (*budget.Reservation, budget.Result, error) {
	if len(cl.plans) == 0 {
		return r, res, err // a paid route has no output cap to clamp
	}
	requested := cl.plans[0].prep.OutputCap
	k := g.clampable(cl, refused)
	if k <= 0 {
		return r, res, err
	}
	if pre != nil {
		pre = cl.entry()
	}
	r, res, err = g.engine.ReserveFor(ctx, cl.limits, cl.estimate, pre)
	if err == nil {
		cl.clamped = &Clamp{Field: cl.plans[0].prep.CapField, Granted: k, Requested: requested}
		g.log.Info("clamped to fit a budget", "request_id", cl.id, "team", cl.principal.Team, "limit", refused.Limit.Bucket,
			"requested", requested, "granted", k)
	}
	return r, res, err
}

// admitted records what an admitted request's reservation found: shadow
// limits that would have refused, budget utilisation and alerts.
func (g *Gateway) admitted(ctx context.Context, cl *Call, res budget.Result) {
	for _, i := range res.Shadowed {
		l := &cl.limits[i]
		g.metrics.ShadowRefusals.WithLabelValues(l.Scope.String(), l.Name, cl.principal.Team).Inc()
		g.log.Info("shadow limit would have refused", "request_id", cl.id, "team", cl.principal.Team,
			"key", cl.principal.Key, "model", cl.model, "limit", l.Bucket, "estimate_usd_micros", int64(cl.estimate.Cost))
	}
	g.observeBudgets(cl, res)
	cl.reserved = res
	g.alerts.check(ctx, cl, res)
}

// degrade decides a request while the store is unavailable, as its route
// is configured: refuse (fail_closed), let it through without a
// reservation (fail_open), or reserve from a local bucket holding this
// instance's share of each limit (local_fallback). Every decision is logged
// and counted; the spend of a request let through is recorded when the
// store answers again.
func (g *Gateway) degrade(ctx context.Context, cl *Call, storeErr error) (*budget.Reservation, budget.Result, error) {
	route := cl.req.Route
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
		r, res, err := g.fallback.Reserve(ctx, local, cl.estimate)
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

package httpapi

import (
	"errors"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream"
)

// count records one request's outcome.
func (g *Gateway) count(cl *call, route string) {
	model := ""
	if cl.req != nil && cl.route != nil {
		model = cl.req.Model // only priced, configured models get here: bounded
	}
	team := ""
	if cl.principal != nil {
		team = cl.principal.Team
	}
	g.metrics.Requests.WithLabelValues(route, team, model, cl.outcome).Inc()
}

// reasonOf names a refusal for the metrics.
func reasonOf(err error) string {
	var reqErr *upstream.RequestError
	var mErr *modelError
	var upErr *upstreamRefused
	switch {
	case errors.As(err, &upErr):
		return upErr.code
	case errors.Is(err, budget.ErrExhausted):
		return "budget_exhausted"
	case errors.Is(err, budget.ErrOverBudget):
		return "budget_too_small_for_request"
	case errors.Is(err, budget.ErrHeld):
		return "budget_held"
	case errors.Is(err, budget.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, budget.ErrConcurrency):
		return "concurrency"
	case errors.Is(err, budget.ErrTooLarge):
		return "too_large_for_limit"
	case errors.Is(err, budget.ErrStoreUnavailable):
		return "store_unavailable"
	case errors.Is(err, errTooLarge):
		return "body_too_large"
	case errors.As(err, &mErr):
		if mErr.allowed {
			return "model_not_allowed"
		}
		return "model_not_found"
	case errors.As(err, &reqErr):
		return "bad_request"
	case errors.Is(err, errClientCanceled):
		return "client_closed"
	}
	return "error"
}

// observeBudgets sets the utilisation of every budget a request touched:
// the share used or reserved, from the store's answer.
func (g *Gateway) observeBudgets(cl *call, res budget.Result) {
	if len(res.Status) != len(cl.limits) {
		return
	}
	for i := range cl.limits {
		l, s := &cl.limits[i], res.Status[i]
		if l.Kind != budget.Ceiling || s.Capacity <= 0 {
			continue
		}
		switch l.Scope {
		case budget.ScopeOrg, budget.ScopeTeam:
			// Per-key, per-user and per-model budgets would multiply the
			// series; org and team are what finance watches.
			g.metrics.BudgetUsed.WithLabelValues(l.Scope.String(), cl.principal.Team, l.Name).
				Set(float64(s.Capacity-s.Remaining) / float64(s.Capacity))
		}
	}
}

// observeUsage records what a served request cost.
func (g *Gateway) observeUsage(cl *call, u budget.Usage, actual budget.Amounts) {
	team, model := cl.principal.Team, cl.req.Model
	g.metrics.SpendMicros.WithLabelValues(team, model).Add(float64(actual.Cost))
	g.metrics.Tokens.WithLabelValues(team, model, "input").Add(float64(u.InputTokens - u.CachedInputTokens))
	g.metrics.Tokens.WithLabelValues(team, model, "cached_input").Add(float64(u.CachedInputTokens))
	g.metrics.Tokens.WithLabelValues(team, model, "output").Add(float64(u.OutputTokens))
	g.metrics.Tokens.WithLabelValues(team, model, "reasoning").Add(float64(u.ReasoningTokens))
	if cl.estimate.Cost > 0 {
		g.metrics.EstimateRatio.WithLabelValues(model).Observe(float64(actual.Cost) / float64(cl.estimate.Cost))
	}
	if u.Estimated {
		g.metrics.UsageEstimated.WithLabelValues(model).Inc()
	}
}

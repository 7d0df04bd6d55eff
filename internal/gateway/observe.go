package gateway

import (
	"github.com/tollgate-dev/tollgate/budget"
)

// observeBudgets sets the utilisation of every budget and rate limit a
// request touched: the share used or reserved (of a bucket: the share of
// its burst taken), from the store's answer.
func (g *Gateway) observeBudgets(cl *Call, res budget.Result) {
	if len(res.Status) != len(cl.limits) {
		return
	}
	for i := range cl.limits {
		l, s := &cl.limits[i], res.Status[i]
		if s.Capacity <= 0 || l.Shadow || (l.Scope != budget.ScopeOrg && l.Scope != budget.ScopeTeam) {
			// Per-key, per-user and per-model limits would multiply the
			// series; org and team are what finance and SREs watch.
			continue
		}
		used := float64(s.Capacity-s.Remaining) / float64(s.Capacity)
		switch l.Kind {
		case budget.Ceiling:
			g.metrics.BudgetUsed.WithLabelValues(l.Scope.String(), cl.principal.Team, l.Name).Set(used)
		case budget.Rate:
			g.metrics.RateUsed.WithLabelValues(l.Scope.String(), cl.principal.Team, l.Name).Set(used)
		}
	}
}

// observeUsage records what a served request cost.
func (g *Gateway) observeUsage(cl *Call, u budget.Usage, actual budget.Amounts) {
	team, model := cl.principal.Team, cl.model
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
	} else if p := cl.served; p != nil && p.prep.InputTokens > 0 {
		g.metrics.InputRatio.WithLabelValues(p.dep.model.Name).Observe(float64(u.InputTokens) / float64(p.prep.InputTokens))
	}
}

package gateway

import (
	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/metrics"
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
		if l.Kind == budget.Ceiling || l.Kind == budget.Rate {
			g.metrics.Budget(metrics.BudgetLabels{Rate: l.Kind == budget.Rate, Scope: l.Scope.String(), Team: cl.principal.Team, Name: l.Name}).Set(used)
		}
	}
}

// observeUsage records what a served request cost.
func (g *Gateway) observeUsage(cl *Call, u budget.Usage, actual budget.Amounts) {
	s := g.metrics.UsageOf(cl.principal.Team, cl.model)
	s.SpendMicros.Add(float64(actual.Cost))
	s.Input.Add(float64(u.InputTokens - u.CachedInputTokens))
	s.CachedInput.Add(float64(u.CachedInputTokens))
	s.Output.Add(float64(u.OutputTokens))
	s.Reasoning.Add(float64(u.ReasoningTokens))
	if cl.estimate.Cost > 0 {
		s.EstimateRatio.Observe(float64(actual.Cost) / float64(cl.estimate.Cost))
	}
	if u.Estimated {
		s.Estimated.Inc()
	} else if p := cl.served; p != nil && p.prep.InputTokens > 0 {
		g.metrics.InputRatioOf(p.dep.model.Name).Observe(float64(u.InputTokens) / float64(p.prep.InputTokens))
	}
}

package gateway

import (
	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/metrics"
)

// observeBudgets sets the utilisation of every budget and rate limit a
// request touched, admitted or refused: a budget's settled spend plus what
// is reserved, over its ceiling — above 1 when the spend has passed it —,
// a rate bucket's share of its burst taken, from the store's answer.
func (g *Gateway) observeBudgets(cl *Call, res budget.Result) {
	if len(res.Status) != len(cl.limits) {
		return
	}
	for i := range cl.limits {
		g.observeBudget(cl, &cl.limits[i], res.Status[i])
	}
}

// observeSettled sets the utilisation of the budgets a served request was
// charged to, once settled (settledStatus): an upstream that billed more
// than was reserved shows at once — past 1 if it took the spend past the
// ceiling — not at the next request.
func (g *Gateway) observeSettled(cl *Call, actual budget.Amounts) {
	if cl.degraded != "" || len(cl.reserved.Status) != len(cl.limits) {
		return // let through unreserved, or against a local share
	}
	for i := range cl.limits {
		if l := &cl.limits[i]; l.Kind == budget.Ceiling {
			g.observeBudget(cl, l, cl.settledStatus(i, actual))
		}
	}
}

// settledStatus is Ceiling i's status once cl is settled at actual, from
// what its reservation found: this request's hold replaced by what it
// cost. Others' settlements since show at the next reservation. Call it
// with cl.reserved's statuses in hand.
func (cl *Call) settledStatus(i int, actual budget.Amounts) budget.Status {
	l, s := &cl.limits[i], cl.reserved.Status[i]
	s.Spent += actual.Of(l.Unit)
	s.Held = max(0, s.Held-cl.estimate.Of(l.Unit))
	s.Remaining = max(0, s.Capacity-s.Spent-s.Held)
	return s
}

// observeBudget sets l's gauge from its status s.
func (g *Gateway) observeBudget(cl *Call, l *budget.Limit, s budget.Status) {
	if s.Capacity <= 0 || l.Shadow || (l.Scope != budget.ScopeOrg && l.Scope != budget.ScopeTeam) {
		// Per-key, per-user and per-model limits would multiply the
		// series; org and team are what finance and SREs watch.
		return
	}
	if l.Kind == budget.Ceiling || l.Kind == budget.Rate {
		used := float64(s.Used()) / float64(s.Capacity)
		g.metrics.Budget(metrics.BudgetLabels{Rate: l.Kind == budget.Rate, Scope: l.Scope.String(), Team: cl.principal.Team, Name: l.Name}).Set(used)
	}
}

// observeUsage records what a served request cost, and the utilisation of
// the budgets it settled.
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
	g.observeSettled(cl, actual)
}

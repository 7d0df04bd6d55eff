package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
)

// overrun reports a settlement e that charged actual, more than it
// reserved: the charge stands (it is what the upstream billed), and it is
// counted, logged and alerted with the request's id, naming each budget
// it took past its ceiling. Causes: a paid API reporting more units than
// the request allowed, an upstream billing past the bound, a late
// correction of a sweep.
func (g *Gateway) overrun(ctx context.Context, cl *Call, e *budget.Entry, actual budget.Amounts) {
	over := actual.Cost - e.Reserved
	if over <= 0 {
		return
	}
	team := cl.principal.Team
	g.metrics.Overruns.WithLabelValues(team, cl.model).Inc()
	g.metrics.OverrunMicros.WithLabelValues(team, cl.model).Add(float64(over))
	var passed []string
	if cl.bypass == "" && len(cl.reserved.Status) == len(cl.limits) {
		for i, l := range cl.limits {
			s := cl.reserved.Status[i]
			if l.Kind != budget.Ceiling || l.Shadow || s.Capacity <= 0 {
				continue
			}
			// Settled as of the reservation, plus this charge: at least
			// what the budget has spent now.
			spent := max(s.Spent, s.Capacity-s.Remaining-s.Held) + actual.Of(l.Unit)
			if spent <= s.Capacity {
				continue
			}
			g.metrics.BudgetOverruns.WithLabelValues(l.Scope.String(), team, l.Name).Inc()
			passed = append(passed, fmt.Sprintf("%s budget %q at %s of %s", l.Scope, l.Name, l.Format(spent), l.Format(s.Capacity)))
		}
	}
	g.log.Error("settlement charged past its reservation", "request_id", cl.id, "org", cl.principal.Org, "team", team,
		"key", cl.principal.Key, "model", cl.model, "reserved_usd_micros", int64(e.Reserved), "charged_usd_micros", int64(actual.Cost),
		"budgets_past_ceiling", passed)
	if g.alerts == nil {
		return
	}
	text := fmt.Sprintf("Tollgate: request %s of %s/%s (%s) was charged %s, %s more than it reserved.",
		cl.id, cl.principal.Org, team, cl.model, actual.Cost.String(), budget.Money(over).String())
	if len(passed) > 0 {
		text += " It took the " + strings.Join(passed, ", the ") + " past the ceiling."
	}
	g.alerts.send(Alert{Kind: "overrun", RequestID: cl.id, Text: text, Scope: "request", Org: cl.principal.Org, Team: team,
		Key: cl.principal.Key, Used: int64(actual.Cost), Limit: int64(e.Reserved), Unit: "usd", Basis: "settled"})
}

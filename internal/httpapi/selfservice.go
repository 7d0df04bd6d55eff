package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
)

// budgetView is one limit as GET /v1/budget shows it to a key holder.
type budgetView struct {
	Scope     string    `json:"scope"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Unit      string    `json:"unit"`
	Limit     int64     `json:"limit"`
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	Period    string    `json:"period,omitempty"`
	ResetsAt  time.Time `json:"resets_at"`
	// Dollar figures for usd budgets, for people.
	LimitUSD     string `json:"limit_usd,omitempty"`
	RemainingUSD string `json:"remaining_usd,omitempty"`
}

// ownBudget answers GET /v1/budget: the calling key's limits and its
// team's (and org's), with what is used, what remains and when each
// resets — nothing about other teams or keys.
func (g *Gateway) ownBudget(c echo.Context) error {
	p := principalOf(c)
	user := c.Request().Header.Get(settingsOf(c).userHeader)
	var limits []budget.Limit
	for _, l := range p.Limits(requestKey{User: user, Route: "/v1/chat/completions"}) {
		if !l.Shadow {
			limits = append(limits, l)
		}
	}
	st, err := g.engine.Peek(c.Request().Context(), limits)
	if err != nil {
		return err
	}
	now := time.Now()
	out := struct {
		Org    string       `json:"org"`
		Team   string       `json:"team"`
		Key    string       `json:"key"`
		Limits []budgetView `json:"limits"`
	}{Org: p.Org, Team: p.Team, Key: p.Key, Limits: []budgetView{}}
	for i, l := range limits {
		s := st[i]
		v := budgetView{Scope: l.Scope.String(), Name: l.Name, Kind: l.Kind.String(), Unit: l.Unit.String(),
			Limit: s.Capacity, Used: s.Capacity - s.Remaining, Remaining: s.Remaining, ResetsAt: now.Add(s.ResetAfter).UTC().Truncate(time.Second)}
		if l.Kind == budget.Ceiling {
			v.Period = l.Period.String()
			v.ResetsAt = budget.PeriodEnd(l.Period, now, l.Location).UTC()
			if l.Unit == budget.Microdollars {
				v.LimitUSD, v.RemainingUSD = dollars(s.Capacity), dollars(s.Remaining)
			}
		}
		out.Limits = append(out.Limits, v)
	}
	return c.JSON(http.StatusOK, out)
}

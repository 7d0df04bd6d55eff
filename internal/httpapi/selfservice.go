package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/httpx"
	"github.com/tollgate-dev/tollgate/policy"
)

// budgetView is one limit as GET /v1/budget shows it to a key holder.
type budgetView struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Unit  string `json:"unit"`
	Limit int64  `json:"limit"`
	// Used is a budget's settled spend plus what requests in flight
	// hold, as it is: past Limit when spend went past the ceiling.
	// Remaining, what can still be taken, stops at zero.
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	Period    string    `json:"period,omitempty"`
	ResetsAt  time.Time `json:"resets_at"`
	// Dollar figures for usd budgets, for people.
	LimitUSD     string `json:"limit_usd,omitempty"`
	UsedUSD      string `json:"used_usd,omitempty"`
	RemainingUSD string `json:"remaining_usd,omitempty"`
}

// ownBudget answers GET /v1/budget: the calling key's limits and its
// team's (and org's), with what is used, what remains and when each
// resets — nothing about other teams or keys.
func (s *Server) ownBudget(c echo.Context) error {
	p := principalOf(c)
	user := httpx.Get(c.Request().Header, settingsOf(c).UserHeader())
	var limits []budget.Limit
	for _, l := range p.Limits(policy.RequestKey{User: user, Route: "/v1/chat/completions"}) {
		if !l.Shadow && l.Kind != budget.Meter {
			limits = append(limits, l)
		}
	}
	st, err := s.gw.Engine().Peek(c.Request().Context(), limits)
	if err != nil {
		return err
	}
	now := time.Now()
	out := struct {
		Org    string       `json:"org"`
		Team   string       `json:"team"`
		Key    string       `json:"key"`
		Limits []budgetView `json:"limits"`
		// Spend is this key's spend today and this month by model, on the
		// org's calendar, whatever its budgets.
		Spend []spendView `json:"spend"`
	}{Org: p.Org, Team: p.Team, Key: p.Key, Limits: []budgetView{}, Spend: []spendView{}}
	for i, l := range limits {
		s := st[i]
		v := budgetView{Scope: l.Scope.String(), Name: l.Name, Kind: l.Kind.String(), Unit: l.Unit.String(),
			Limit: s.Capacity, Used: s.Used(), Remaining: s.Remaining, ResetsAt: now.Add(s.ResetAfter).UTC().Truncate(time.Second)}
		if l.Kind == budget.Ceiling {
			v.Period = l.Period.String()
			v.ResetsAt = budget.PeriodEnd(l.Period, now, l.Location).UTC()
			if l.Unit == budget.Microdollars {
				v.LimitUSD, v.UsedUSD, v.RemainingUSD = dollars(s.Capacity), dollars(v.Used), dollars(s.Remaining)
			}
		}
		out.Limits = append(out.Limits, v)
	}
	var meters []budget.Limit
	var models []string
	for _, m := range settingsOf(c).Models(p) {
		models = append(models, m.Name)
		meters = append(meters, p.Meters(m.Name)...)
	}
	paid := len(models) // paid routes are metered by their names, as models are
	for _, name := range settingsOf(c).PaidRoutes() {
		models = append(models, name)
		meters = append(meters, p.Meters(name)...)
	}
	st, err = s.gw.Engine().Peek(c.Request().Context(), meters)
	if err != nil {
		return err
	}
	for i, m := range models {
		day, month := st[2*i], st[2*i+1]
		v := spendView{Model: m, Day: budget.PeriodID(budget.Day, now, p.Location()), Month: budget.PeriodID(budget.Month, now, p.Location()),
			DayMicros: day.Spent, MonthMicros: month.Spent, PaidRoute: i >= paid}
		if v.MonthMicros == 0 {
			continue
		}
		v.DayUSD, v.MonthUSD = dollars(v.DayMicros), dollars(v.MonthMicros)
		out.Spend = append(out.Spend, v)
	}
	return c.JSON(http.StatusOK, out)
}

// spendView is one model's spend by the calling key, from the store's
// meters (settled and still reserved).
type spendView struct {
	Model       string `json:"model"` // or a paid route's name
	PaidRoute   bool   `json:"paid_route,omitempty"`
	Day         string `json:"day"`
	DayMicros   int64  `json:"day_usd_micros"`
	DayUSD      string `json:"day_usd"`
	Month       string `json:"month"`
	MonthMicros int64  `json:"month_usd_micros"`
	MonthUSD    string `json:"month_usd"`
}

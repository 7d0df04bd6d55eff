package admin

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// ceilingChange is the body of PUT /admin/v1/ceilings: a team budget (or
// an org's, without team) by name, its new amount — µ$ or "$1200" — or
// "reset" to go back to the configured one.
type ceilingChange struct {
	Org    string `json:"org"`
	Team   string `json:"team"`
	Name   string `json:"name"`
	Amount string `json:"amount"`
}

func (a *API) setCeiling(c echo.Context) error {
	var req ceilingChange
	if err := c.Bind(&req); err != nil || req.Org == "" || req.Name == "" || req.Amount == "" {
		return fail(c, http.StatusBadRequest, "bad_request", "Send {org, team, name, amount}.")
	}
	l, ok := a.findBudget(req.Org, req.Team, req.Name)
	if !ok {
		return fail(c, http.StatusNotFound, "not_found", "No such budget.")
	}
	amount := int64(-1)
	if req.Amount != "reset" {
		var m config.Money
		var node yaml.Node
		node.Kind, node.Value = yaml.ScalarNode, req.Amount
		if err := m.UnmarshalYAML(&node); err != nil || m.Value < 0 || (l.Unit != budget.Microdollars && m.Dollars) {
			return fail(c, http.StatusBadRequest, "bad_amount", `amount is an integer, a dollar string such as "$1200" for usd budgets, or "reset".`)
		}
		amount = m.Value
	}
	old, err := a.engine.Peek(c.Request().Context(), []budget.Limit{l})
	if err != nil {
		return err
	}
	if err := a.engine.SetCeiling(c.Request().Context(), l, amount); err != nil {
		return err
	}
	now, err := a.engine.Peek(c.Request().Context(), []budget.Limit{l})
	if err != nil {
		return err
	}
	if err := a.record(auditEntry{Time: time.Now().UTC(), Who: caller(c).Name, Action: "set_ceiling", Target: l.Bucket,
		Old: old[0].Capacity, New: now[0].Capacity}); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"budget": l.Bucket, "old": old[0].Capacity, "new": now[0].Capacity, "remaining": now[0].Remaining})
}

// findBudget locates a configured budget limit of an org or a team.
func (a *API) findBudget(org, team, name string) (budget.Limit, bool) {
	for _, o := range a.cfg.Orgs {
		if o.ID != org {
			continue
		}
		loc := time.UTC
		if o.TimeZone != "" {
			loc, _ = time.LoadLocation(o.TimeZone)
		}
		limits, path, scope := o.Limits, org, budget.ScopeOrg
		if team != "" {
			found := false
			for _, t := range o.Teams {
				if t.ID == team {
					limits, path, scope, found = append(append([]config.Limit{}, a.cfg.Plans[t.Plan]...), t.Limits...), org+"/"+team, budget.ScopeTeam, true
				}
			}
			if !found {
				return budget.Limit{}, false
			}
		}
		for _, l := range limits {
			if l.Name == name && l.Kind == "budget" {
				b := budget.Limit{Bucket: scope.String() + ":" + path + ":" + l.Name, Name: l.Name, Partition: org, Scope: scope,
					Kind: budget.Ceiling, Amount: l.Amount.Value, Location: loc}
				b.Unit = map[string]budget.Unit{"usd": budget.Microdollars, "tokens": budget.Tokens, "requests": budget.Requests}[l.Unit]
				b.Period = map[string]budget.Period{"day": budget.Day, "month": budget.Month}[l.Period]
				return b, true
			}
		}
	}
	return budget.Limit{}, false
}

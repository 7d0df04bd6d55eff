package admin

import (
	"context"
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
)

// Statement is one team's month: its spend by model and by key, the total,
// and the monthly dollar ceiling in force at the month's end (now, for
// this month) with the changes made to it during the month.
type Statement struct {
	Org       string       `json:"org"`
	Team      string       `json:"team"`
	Month     string       `json:"month"`
	TimeZone  string       `json:"time_zone"`
	Models    []Row        `json:"models"`
	Keys      []Row        `json:"keys"`
	Total     Row          `json:"total"`
	Ceiling   int64        `json:"ceiling_usd_micros"` // 0: no monthly dollar budget
	Changes   []auditEntry `json:"ceiling_changes"`
	Generated time.Time    `json:"generated"`
}

// statement answers GET /admin/v1/statements?org=O[&team=T]&month=YYYY-MM
// &format=html|csv|json: a printable page (the default), a CSV file, or
// JSON — one team's, or without team every team of the org in one (a
// viewer: only its own teams, and one of them at least).
func (a *API) statement(c echo.Context) error {
	org, team := c.QueryParam("org"), c.QueryParam("team")
	var teams []string
	if team != "" {
		if _, ok := a.teamBudgets(org, team); !ok || !sees(caller(c), org, team) {
			return fail(c, http.StatusNotFound, "not_found", "No such team.")
		}
		teams = []string{team}
	} else {
		for _, o := range a.config().Orgs {
			if o.ID != org {
				continue
			}
			for _, t := range o.Teams {
				if sees(caller(c), org, t.ID) {
					teams = append(teams, t.ID)
				}
			}
		}
		if len(teams) == 0 {
			return fail(c, http.StatusNotFound, "not_found", "No such org, or none of its teams is yours.")
		}
	}
	start, err := time.Parse("2006-01", c.QueryParam("month"))
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_month", "month is YYYY-MM.")
	}
	var sts []Statement
	for _, t := range teams {
		st, err := a.teamStatement(c.Request().Context(), org, t, start)
		if err != nil {
			return err
		}
		sts = append(sts, st)
	}
	if team != "" {
		switch c.QueryParam("format") {
		case "json":
			return c.JSON(http.StatusOK, sts[0])
		case "csv":
			return statementCSV(c, sts[0].Org+"-"+sts[0].Team, sts)
		}
		return render(c, http.StatusOK, "statement", sts[0])
	}
	total := Row{Group: map[string]string{}}
	for _, st := range sts {
		total.Requests += st.Total.Requests
		total.InputTokens += st.Total.InputTokens
		total.CachedInputTokens += st.Total.CachedInputTokens
		total.OutputTokens += st.Total.OutputTokens
		total.USDMicros += st.Total.USDMicros
	}
	total.USD = total.USDMicros.Decimal()
	switch c.QueryParam("format") {
	case "json":
		return c.JSON(http.StatusOK, map[string]any{"org": org, "month": start.Format("2006-01"), "teams": sts, "total": total})
	case "csv":
		return statementCSV(c, org, sts)
	}
	return render(c, http.StatusOK, "orgstatement", map[string]any{"Org": org, "Month": start.Format("2006-01"), "Teams": sts, "Total": total})
}

// teamStatement is a team's statement of the month starting at start.
func (a *API) teamStatement(ctx context.Context, org, team string, start time.Time) (Statement, error) {
	limits, _ := a.teamBudgets(org, team)
	calendar, err := a.calendar("")
	if err != nil {
		return Statement{}, err
	}
	end := start.AddDate(0, 1, 0)
	only := []string{org + "/" + team}
	st := Statement{Org: org, Team: team, Month: start.Format("2006-01"), TimeZone: calendar(org).String(), Generated: a.now().UTC()}
	if st.Models, err = Report(ctx, a.ledger, start, end, []string{"model"}, calendar, only); err != nil {
		return st, err
	}
	st.Keys, _ = Report(ctx, a.ledger, start, end, []string{"key"}, calendar, only)
	st.Total = Row{Group: map[string]string{}}
	for _, r := range st.Models {
		st.Total.Requests += r.Requests
		st.Total.InputTokens += r.InputTokens
		st.Total.CachedInputTokens += r.CachedInputTokens
		st.Total.OutputTokens += r.OutputTokens
		st.Total.USDMicros += r.USDMicros
	}
	st.Total.USD = st.Total.USDMicros.Decimal()
	trail, err := a.trail.List(ctx)
	if err != nil {
		return st, err
	}
	loc := calendar(org)
	monthStart, monthEnd := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, loc), time.Date(end.Year(), end.Month(), 1, 0, 0, 0, 0, loc)
	for _, l := range limits {
		if l.Unit != budget.Microdollars || l.Period != budget.Month {
			continue
		}
		if now := a.now(); now.Before(monthEnd) && !now.Before(monthStart) {
			// This month: the ceiling in force now, from the store (the
			// audit trail may be kept nowhere: no audit_path).
			st.Ceiling = l.Amount
			if s, err := a.engine.Peek(ctx, []budget.Limit{l}); err == nil {
				st.Ceiling = s[0].Capacity
			}
		} else {
			st.Ceiling = ceilingAt(trail, l.Bucket, l.Amount, monthEnd.Add(-time.Microsecond)) // its last instant
		}
		for _, e := range trail {
			ceiling := (e.Action == "set_ceiling" || e.Action == "freeze" || e.Action == "unfreeze" || e.Action == "schedule_ceiling") && e.Target == l.Bucket
			reset := e.Action == "reset_period" && strings.HasPrefix(e.Target, l.Bucket+":")
			if (ceiling || reset) && !e.Time.Before(monthStart) && e.Time.Before(monthEnd) {
				e.Who = "" // a statement says what changed, not who changed it
				st.Changes = append(st.Changes, e)
			}
		}
	}
	return st, nil
}

// teamBudgets are a team's budgets, false if there is no such team.
func (a *API) teamBudgets(org, team string) ([]budget.Limit, bool) {
	limits, _, ok := a.budgets(org, team, "")
	return limits, ok
}

// statementCSV writes sts (one team's, or an org's every team) as one CSV
// file named for what: per team one line per model and per key, the
// total, resets and the ceiling.
func statementCSV(c echo.Context, what string, sts []Statement) error {
	w := c.Response()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+fileName("tollgate-statement-"+what+"-"+sts[0].Month)+`.csv"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"month", "org", "team", "section", "item", "requests", "input_tokens", "cached_input_tokens", "output_tokens", "usd_micros", "usd"})
	for _, st := range sts {
		statementLines(cw, st)
	}
	cw.Flush()
	return cw.Error()
}

// statementLines writes st's lines.
func statementLines(cw *csv.Writer, st Statement) {
	line := func(section, item string, r Row) {
		_ = cw.Write([]string{st.Month, cell(st.Org), cell(st.Team), section, cell(item), strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.InputTokens, 10),
			strconv.FormatInt(r.CachedInputTokens, 10), strconv.FormatInt(r.OutputTokens, 10), strconv.FormatInt(int64(r.USDMicros), 10), r.USDMicros.Decimal()})
	}
	for _, r := range st.Models {
		line("model", r.Group["model"], r)
	}
	for _, r := range st.Keys {
		line("key", r.Group["key"], r)
	}
	line("total", "", st.Total)
	for _, e := range st.Changes {
		if e.Action == "reset_period" { // spend started over: the month's total is more than one ceiling may allow
			old, _ := e.Old.(int64)
			if f, ok := e.Old.(float64); ok {
				old = int64(f)
			}
			_ = cw.Write([]string{st.Month, cell(st.Org), cell(st.Team), "period_reset", e.Time.UTC().Format(time.RFC3339) + " " + cell(e.Reason), "", "", "", "", strconv.FormatInt(old, 10), budget.Money(old).Decimal()})
		}
	}
	if st.Ceiling > 0 {
		_ = cw.Write(slices.Concat([]string{st.Month, st.Org, st.Team, "ceiling", "in force at month end"}, []string{"", "", "", "", strconv.FormatInt(st.Ceiling, 10), budget.Money(st.Ceiling).Decimal()}))
	}
}

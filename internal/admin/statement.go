package admin

import (
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

// statement answers GET /admin/v1/statements?org=O&team=T&month=YYYY-MM
// &format=html|csv|json: a printable page (the default), a CSV file, or
// JSON. A viewer gets only its own teams'.
func (a *API) statement(c echo.Context) error {
	org, team := c.QueryParam("org"), c.QueryParam("team")
	limits, ok := a.teamBudgets(org, team)
	if !ok || team == "" || !sees(caller(c), org, team) {
		return fail(c, http.StatusNotFound, "not_found", "No such team.")
	}
	start, err := time.Parse("2006-01", c.QueryParam("month"))
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_month", "month is YYYY-MM.")
	}
	calendar, err := a.calendar("")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	end := start.AddDate(0, 1, 0)
	only := []string{org + "/" + team}
	st := Statement{Org: org, Team: team, Month: start.Format("2006-01"), TimeZone: calendar(org).String(), Generated: a.now().UTC()}
	if st.Models, err = Report(ctx, a.ledger, start, end, []string{"model"}, calendar, only); err != nil {
		return err
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
		return err
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
	switch c.QueryParam("format") {
	case "json":
		return c.JSON(http.StatusOK, st)
	case "csv":
		return statementCSV(c, st)
	}
	return render(c, http.StatusOK, "statement", st)
}

// teamBudgets are a team's budgets, false if there is no such team.
func (a *API) teamBudgets(org, team string) ([]budget.Limit, bool) {
	limits, _, ok := a.budgets(org, team, "")
	return limits, ok
}

// statementCSV writes st as a CSV file: one line per model and per key,
// the total, and the ceiling.
func statementCSV(c echo.Context, st Statement) error {
	w := c.Response()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+fileName("tollgate-statement-"+st.Org+"-"+st.Team+"-"+st.Month)+`.csv"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"month", "org", "team", "section", "item", "requests", "input_tokens", "cached_input_tokens", "output_tokens", "usd_micros", "usd"})
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
	cw.Flush()
	return cw.Error()
}

package admin

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/policy"
)

// Dimensions a report can group by.
var Dimensions = []string{"org", "team", "key", "user", "model", "served_model", "route", "upstream", "day", "month"}

// Row is one group of a report.
type Row struct {
	Group             map[string]string `json:"group"`
	Requests          int64             `json:"requests"`
	InputTokens       int64             `json:"input_tokens"`
	CachedInputTokens int64             `json:"cached_input_tokens"`
	OutputTokens      int64             `json:"output_tokens"`
	USDMicros         budget.Money      `json:"usd_micros"`
	USD               string            `json:"usd"`
	Estimated         int64             `json:"estimated"`
}

// Report sums the ledger's served entries by the dimensions in by. Each
// entry is read on the calendar of its org (calendar returns it): it
// counts if its wall-clock time there is in [from, to) — civil times,
// given in UTC — and its day and month are the ones there, so a team in
// Tokyo and a team in New York each get their own November, the one
// their budgets reset on. teams ("org/team") limits it to what the caller
// may see; nil: every team. A ledger that sums by itself (PostgreSQL) does;
// the file is read entry by entry.
func Report(ctx context.Context, src ledger.Source, from, to time.Time, by []string, calendar func(org string) *time.Location, teams []string) ([]Row, error) {
	rows := map[string]*Row{}
	var err error
	if agg, ok := src.(ledger.Aggregator); ok {
		var groups []ledger.Group
		groups, err = agg.Aggregate(ctx, ledger.Query{From: from, To: to, By: by, Calendar: calendar, Teams: teams})
		for _, g := range groups {
			r := &Row{Group: map[string]string{}, Requests: g.Requests, InputTokens: g.InputTokens, CachedInputTokens: g.CachedInputTokens,
				OutputTokens: g.OutputTokens, USDMicros: budget.Money(g.USDMicros), Estimated: g.Estimated}
			for i, d := range by {
				r.Group[d] = g.Key[i]
			}
			rows[strings.Join(g.Key, "\x00")] = r
		}
	} else {
		err = scanReport(ctx, src, from, to, by, calendar, teams, rows)
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		r.USD = r.USDMicros.Decimal()
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		for _, d := range by {
			if c := strings.Compare(a.Group[d], b.Group[d]); c != 0 {
				return c
			}
		}
		return 0
	})
	return out, err
}

// scanReport sums src entry by entry into rows.
func scanReport(ctx context.Context, src ledger.Source, from, to time.Time, by []string, calendar func(org string) *time.Location, teams []string, rows map[string]*Row) error {
	// Civil times are within a day of UTC everywhere (UTC−12 to UTC+14).
	return src.Scan(ctx, from.Add(-24*time.Hour), to.Add(24*time.Hour), func(e budget.Entry) error {
		if !e.Served || (teams != nil && !slices.Contains(teams, e.Org+"/"+e.Team)) {
			return nil
		}
		local := e.Time.In(calendar(e.Org))
		civil := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
		if civil.Before(from) || !civil.Before(to) {
			return nil
		}
		group := map[string]string{}
		key := make([]string, len(by))
		for i, d := range by {
			group[d] = dimension(e, d, local)
			key[i] = group[d]
		}
		k := strings.Join(key, "\x00")
		r := rows[k]
		if r == nil {
			r = &Row{Group: group}
			rows[k] = r
		}
		r.Requests++
		r.InputTokens += e.Usage.InputTokens
		r.CachedInputTokens += e.Usage.CachedInputTokens
		r.OutputTokens += e.Usage.OutputTokens
		r.USDMicros += e.Cost
		if e.Usage.Estimated {
			r.Estimated++
		}
		return nil
	})
}

// teamsFor is what a report shows caller t: the team only (org/team) if
// given, else every team a viewer names, else nil (all).
func teamsFor(t config.AdminToken, only string) []string {
	switch {
	case only != "":
		return []string{only}
	case t.Role == "viewer":
		return append([]string{}, t.Teams...)
	}
	return nil
}

// dimension is entry e's value of dimension d; local is its time on its
// org's calendar. A team is named org/team and a key org/team/key: two
// orgs may have a team (or a key) of the same id, and a report that
// merged them would charge one's spend back to the other. A model is as
// the client named it (an alias, say), served_model the model that
// served it.
func dimension(e budget.Entry, d string, local time.Time) string {
	switch d {
	case "org":
		return e.Org
	case "team":
		return e.Org + "/" + e.Team
	case "key":
		return e.Org + "/" + e.Team + "/" + e.Key
	case "served_model":
		if e.ServedModel != "" {
			return e.ServedModel
		}
		return e.Model
	case "user":
		return e.User
	case "model":
		return e.Model
	case "route":
		return e.Route
	case "upstream":
		return e.Upstream
	case "day":
		return local.Format("2006-01-02")
	case "month":
		return local.Format("2006-01")
	}
	return ""
}

// calendar returns the calendar a report reads entries on: tz for all if
// given, else each org's own (its time_zone, or the config's), the one its
// team budgets reset on.
func (a *API) calendar(tz string) (func(org string) *time.Location, error) {
	if tz != "" {
		loc, err := time.LoadLocation(tz)
		return func(string) *time.Location { return loc }, err
	}
	def, err := time.LoadLocation(a.config().TimeZone)
	if err != nil {
		return nil, err
	}
	orgs := map[string]*time.Location{}
	for _, o := range a.config().Orgs {
		if orgs[o.ID], err = policy.OrgLocation(a.config(), o); err != nil {
			return nil, err
		}
	}
	return func(org string) *time.Location {
		if loc := orgs[org]; loc != nil {
			return loc
		}
		return def
	}, nil
}

// reports answers GET /admin/v1/reports?month=2026-11 (or from=…&to=…,
// dates) &by=team,model &tz=Europe/Berlin &team=org/team &format=json|csv.
// Without tz each org's spend is read on its own calendar.
func (a *API) reports(c echo.Context) error {
	q := c.QueryParams()
	tz := q.Get("tz")
	calendar, err := a.calendar(tz)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_time_zone", "Unknown time zone "+strconv.Quote(tz)+".")
	}
	var from, to time.Time
	switch {
	case q.Get("month") != "":
		m, err := time.Parse("2006-01", q.Get("month"))
		if err != nil {
			return fail(c, http.StatusBadRequest, "bad_month", "month is YYYY-MM.")
		}
		from, to = m, m.AddDate(0, 1, 0)
	case q.Get("from") != "" && q.Get("to") != "":
		f, err1 := time.Parse("2006-01-02", q.Get("from"))
		t, err2 := time.Parse("2006-01-02", q.Get("to"))
		if err1 != nil || err2 != nil || !t.After(f) {
			return fail(c, http.StatusBadRequest, "bad_range", "from and to are dates (YYYY-MM-DD), to after from (exclusive).")
		}
		from, to = f, t
	default:
		return fail(c, http.StatusBadRequest, "missing_period", "Give month=YYYY-MM, or from and to.")
	}
	by := []string{"team"}
	if v := q.Get("by"); v != "" {
		by = strings.Split(v, ",")
	}
	for _, d := range by {
		if !slices.Contains(Dimensions, d) {
			return fail(c, http.StatusBadRequest, "bad_dimension", fmt.Sprintf("Unknown dimension %q (one of %v).", d, Dimensions))
		}
	}
	t := caller(c)
	only := q.Get("team") // org/team
	if only != "" {
		org, team, _ := strings.Cut(only, "/")
		if !sees(t, org, team) {
			// The same answer as for a team that does not exist.
			return fail(c, http.StatusNotFound, "not_found", "No such team.")
		}
	}
	rows, err := Report(c.Request().Context(), a.ledger, from, to, by, calendar, teamsFor(t, only))
	if err != nil {
		return err
	}
	if q.Get("format") == "csv" {
		name := "tollgate-report-" + from.Format("2006-01-02") + "-to-" + to.Format("2006-01-02")
		if only != "" {
			name += "-" + only
		}
		return writeCSV(c, name, by, rows)
	}
	if tz == "" {
		tz = "each org's own"
	}
	return c.JSON(http.StatusOK, map[string]any{"from": from.Format("2006-01-02"), "to": to.Format("2006-01-02"), "time_zone": tz, "by": by, "rows": rows})
}

func writeCSV(c echo.Context, name string, by []string, rows []Row) error {
	w := c.Response()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+fileName(name)+`.csv"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	header := append(append([]string{}, by...), "requests", "input_tokens", "cached_input_tokens", "output_tokens", "usd_micros", "usd", "estimated")
	_ = cw.Write(header)
	for _, r := range rows {
		rec := make([]string, 0, len(header))
		for _, d := range by {
			rec = append(rec, cell(r.Group[d]))
		}
		rec = append(rec, strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.InputTokens, 10), strconv.FormatInt(r.CachedInputTokens, 10),
			strconv.FormatInt(r.OutputTokens, 10), strconv.FormatInt(int64(r.USDMicros), 10), r.USD, strconv.FormatInt(r.Estimated, 10))
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// cell is a CSV cell's text, neutralised: a value that starts with = + -
// @, a tab or a carriage return is a formula to a spreadsheet
// (=HYPERLINK(…) in a user id a client sent), so it gets a leading
// apostrophe, which spreadsheets show as text (OWASP's CSV injection
// advice). Only text from requests and config goes through it; the
// figures the report computes are written as they are.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// fileName is name with every character but letters, digits, '-', '_'
// and '.' replaced by '_': safe in a Content-Disposition header and on
// any file system.
func fileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, name)
}

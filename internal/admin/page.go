package admin

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/policy"
)

// The finance page at /admin/: server-rendered HTML with inline SVG, no
// script, no CDN. It reads a month (the picker moves it), draws daily spend
// per team and per model, forecasts the month's end, shows the ceiling that
// was in force in past months (from the audit trail), the alerts of the
// period, and a team's budgets and keys; admins and finance change them
// through forms (CSRF-protected, confirmed where the API asks, audited as
// the API's changes are). Viewers read their own teams only.

// cookieName carries an admin token for the web page (set from ?token=,
// HttpOnly, same site).
const cookieName = "tollgate_admin"

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	// usd: an amount someone set, whole; cents: spend, to the cent.
	"usd":    func(v any) string { m, _ := amountOf(v); return budget.Money(m).Dollars() },
	"cents":  func(v any) string { m, _ := amountOf(v); return budget.Money(m).Cents() },
	"micros": func(m budget.Money) int64 { return int64(m) },
	"pct": func(a, b int64) string {
		if b <= 0 {
			return ""
		}
		return strconv.FormatFloat(100*float64(a)/float64(b), 'f', 1, 64) + "%"
	},
	"width": func(a, b int64) int {
		if b <= 0 {
			return 0
		}
		return int(min(300, 300*a/b))
	},
	"date": func(t time.Time) string { return t.Format("2006-01-02 15:04 MST") },
	"n":    thousands,
	"divf": func(a, b int64) float64 { return float64(a) / float64(b) },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}).Parse(pageHTML))

// teamRow is one team's month on the page.
type teamRow struct {
	Org, Team string
	Spent     int64
	// Ceiling is the team's monthly dollar budget as in force at the
	// month's end (now, for this month), if HasCeiling: a team frozen at
	// $0 has a ceiling of 0, which is not none. FromAudit: it differs from
	// today's.
	Ceiling    int64
	HasCeiling bool
	FromAudit  bool
	Forecast   *Forecast
}

// budgetRow is one budget on the team view, with its forms.
type budgetRow struct {
	Org, Team string
	CeilingView
	Alerts []alertRow
	// The amounts in the budget's unit, for people.
	USD                     bool
	HConfigured, HIn, HUsed string
}

// historyRow is a change of one of the team's budgets, in its unit.
type historyRow struct {
	auditEntry
	HOld, HNew string
}

type alertRow struct {
	Threshold int64
	Fired     int64
}

type pageData struct {
	Month, Prev, Next string
	Current           bool // the month is the present one
	Team              string
	Teams             []teamRow
	Total             int64
	TeamChart         template.HTML
	ModelChart        template.HTML
	Cumulative        template.HTML
	Models, Keys      []Row
	Budgets           []budgetRow
	OrgBudgets        []budgetRow
	History           []historyRow
	KeyList           []policy.KeyView
	Forecast          *Forecast
	CSV, Statement    string
	Viewer, Role      string
	CanEdit, CanKeys  bool
	CSRF              string
	// AuditOrgs are the orgs whose change pages the caller may read.
	AuditOrgs []string
	// Sort orders the team table ("" by name, "spent", "used",
	// "forecast": largest first); AtRisk keeps the teams at risk only, of
	// AllTeams.
	Sort      string
	AtRisk    bool
	AllTeams  int
	Notice    string
	Changed   bool
	Generated time.Time
}

// page answers GET /admin/: the month's overview, or with team=org/team
// that team's view.
func (a *API) page(c echo.Context) error {
	if tok := c.QueryParam("token"); tok != "" {
		// Trade the token in the address for a cookie, and drop it from
		// the address (and the browser history) at once.
		c.SetCookie(&http.Cookie{Name: cookieName, Value: tok, Path: "/admin", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := c.QueryParams()
		q.Del("token")
		return c.Redirect(http.StatusSeeOther, c.Request().URL.Path+"?"+q.Encode())
	}
	t := caller(c)
	ctx := c.Request().Context()
	loc, _ := time.LoadLocation(a.config().TimeZone) // validated with the config
	now := a.now().In(loc)
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	start, err := time.Parse("2006-01", c.QueryParam("month"))
	if err != nil {
		start = thisMonth
	}
	month := start.Format("2006-01")
	d := pageData{Month: month, Prev: start.AddDate(0, -1, 0).Format("2006-01"), Next: start.AddDate(0, 1, 0).Format("2006-01"),
		Current: start.Equal(thisMonth), Team: c.QueryParam("team"), Viewer: t.Name, Role: t.Role, Generated: now,
		CanEdit: t.Role == "admin" || t.Role == "finance", CanKeys: t.Role == "admin" && a.keys != nil,
		CSRF: csrfOf(c), Notice: a.config().AdminNotice, Changed: c.QueryParam("changed") != "",
		CSV: "/admin/v1/reports?month=" + month + "&by=team,model&format=csv"}
	if d.Team != "" {
		org, team, _ := strings.Cut(d.Team, "/")
		if _, ok := policy.ScopeLimits(a.config(), org, team); !ok || team == "" || !sees(t, org, team) {
			return fail(c, http.StatusNotFound, "not_found", "No such team.")
		}
		d.CSV += "&team=" + d.Team
		d.Statement = "/admin/v1/statements?org=" + org + "&team=" + team + "&month=" + month
	}
	if err := a.fillPage(ctx, t, &d, start, now); err != nil {
		return err
	}
	d.Sort, d.AtRisk = c.QueryParam("sort"), c.QueryParam("risk") == "1"
	d.AllTeams = len(d.Teams)
	d.Teams = sortTeams(d.Teams, d.Sort, d.AtRisk)
	if d.CanEdit {
		for _, o := range a.config().Orgs {
			if d.Team == "" || strings.HasPrefix(d.Team, o.ID+"/") {
				d.AuditOrgs = append(d.AuditOrgs, o.ID)
			}
		}
	}
	return render(c, http.StatusOK, "page", d)
}

// fillPage reads the month's figures into d.
func (a *API) fillPage(ctx context.Context, t config.AdminToken, d *pageData, start, now time.Time) error {
	calendar, err := a.calendar("")
	if err != nil {
		return err
	}
	end := start.AddDate(0, 1, 0)
	filter := teamsFor(t, d.Team)
	report := func(by ...string) ([]Row, error) { return Report(ctx, a.ledger, start, end, by, calendar, filter) }
	byTeam, err := report("org", "team")
	if err != nil {
		return err
	}
	teamDays, _ := report("org", "team", "day")
	modelDays, _ := report("model", "day")
	d.Models, _ = report("model")
	d.Keys, _ = report("team", "key")
	byUSD := func(x, y Row) int { return int(y.USDMicros - x.USDMicros) }
	slices.SortFunc(d.Models, byUSD)
	slices.SortFunc(d.Keys, byUSD)
	d.Models, d.Keys = d.Models[:min(len(d.Models), 10)], d.Keys[:min(len(d.Keys), 10)]

	// The trail gives past months their ceilings; only admins and
	// finance see its entries.
	trail, err := a.trail.List(ctx)
	if err != nil {
		return err
	}
	monthEnd := time.Date(end.Year(), end.Month(), 1, 0, 0, 0, 0, now.Location())
	asOf := monthEnd.Add(-time.Microsecond) // the month's last instant: a change from the next one is not its ceiling
	if d.Current {
		asOf = now
	}
	d.Teams, d.Total = a.teamRows(ctx, t, d.Team, byTeam, trail, asOf, d.Current)
	days := daysOf(start)
	d.TeamChart = stacked("by-team", "Daily spend by team", days, teamDays, func(r Row) string { return r.Group["team"] })
	d.ModelChart = stacked("by-model", "Daily spend by model", days, modelDays, func(r Row) string { return r.Group["model"] })
	// The budgets, with their forms, are this month's: a past month's
	// page shows what was spent against what was in force then (Teams),
	// not today's budgets to change.
	if d.Team == "" {
		if d.CanEdit && d.Current {
			for _, o := range a.config().Orgs {
				rows, err := a.budgetRows(ctx, o.ID, "")
				if err != nil {
					return err
				}
				d.OrgBudgets = append(d.OrgBudgets, rows...)
			}
		}
		return nil
	}
	org, team, _ := strings.Cut(d.Team, "/")
	if d.Current {
		if d.Budgets, err = a.budgetRows(ctx, org, team); err != nil {
			return err
		}
	}
	if len(d.Teams) == 1 {
		d.Forecast = d.Teams[0].Forecast
		d.Cumulative = cumulative(days, modelDays, d.Teams[0].Ceiling, d.Forecast, start)
	}
	if d.CanEdit {
		limits, _ := a.teamBudgets(org, team)
		d.History = history(trail, limits)
	}
	if a.keys != nil {
		d.KeyList = a.keys.ListKeys(org, team)
	}
	return nil
}

// teamRows are the month's spend of every team t may see (only one, when
// only names it) against the monthly dollar ceiling in force at asOf, and
// their total; this month's with a forecast.
func (a *API) teamRows(ctx context.Context, t config.AdminToken, only string, byTeam []Row, trail []auditEntry, asOf time.Time, current bool) ([]teamRow, int64) {
	spent := map[string]int64{}
	var total int64
	for _, r := range byTeam {
		spent[r.Group["team"]] = int64(r.USDMicros)
		total += int64(r.USDMicros)
	}
	var rows []teamRow
	for _, o := range a.config().Orgs {
		for _, tm := range o.Teams {
			id := o.ID + "/" + tm.ID
			if !sees(t, o.ID, tm.ID) || (only != "" && id != only) {
				continue
			}
			row := teamRow{Org: o.ID, Team: tm.ID, Spent: spent[id]}
			limits, _, _ := a.budgets(o.ID, tm.ID, "")
			for _, b := range limits {
				if b.Unit != budget.Microdollars || b.Period != budget.Month {
					continue
				}
				live := b.Amount
				if st, err := a.engine.Peek(ctx, []budget.Limit{b}); err == nil {
					live = st[0].Capacity
				}
				row.Ceiling, row.HasCeiling = live, true
				if !current {
					row.Ceiling = ceilingAt(trail, b.Bucket, b.Amount, asOf)
					row.FromAudit = row.Ceiling != live
				} else {
					ms := time.Date(asOf.In(b.Location).Year(), asOf.In(b.Location).Month(), 1, 0, 0, 0, 0, b.Location)
					f := forecast(row.Spent, row.Ceiling, ms, ms.AddDate(0, 1, 0), asOf)
					row.Forecast = &f
				}
			}
			if current && row.Forecast == nil {
				loc, _ := policy.OrgLocation(a.config(), o)
				ms := time.Date(asOf.In(loc).Year(), asOf.In(loc).Month(), 1, 0, 0, 0, 0, loc)
				f := forecast(row.Spent, -1, ms, ms.AddDate(0, 1, 0), asOf)
				row.Forecast = &f
			}
			rows = append(rows, row)
		}
	}
	return rows, total
}

// atRisk tells a team whose month is in danger: a ceiling it has used 80 %
// of, or will reach before the month ends at its burn rate (or already
// did).
func (r teamRow) atRisk() bool {
	if !r.HasCeiling {
		return false
	}
	if r.Spent*10 >= r.Ceiling*8 {
		return true
	}
	f := r.Forecast
	return f != nil && (f.Reached || f.MetAt != nil || f.Projected >= r.Ceiling)
}

// usedPermille is how much of its ceiling a team has used, in ‰ (a frozen
// team that spent is past any other).
func (r teamRow) usedPermille() int64 {
	switch {
	case !r.HasCeiling:
		return -1
	case r.Ceiling == 0:
		if r.Spent > 0 {
			return 1 << 40
		}
		return 0
	}
	return r.Spent * 1000 / r.Ceiling
}

// sortTeams orders rows by sort, largest first ("" or unknown: as they
// are, by name), keeping only those at risk if risk.
func sortTeams(rows []teamRow, sort string, risk bool) []teamRow {
	if risk {
		kept := rows[:0:0]
		for _, r := range rows {
			if r.atRisk() {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	key := map[string]func(teamRow) int64{
		"spent": func(r teamRow) int64 { return r.Spent },
		"used":  teamRow.usedPermille,
		"forecast": func(r teamRow) int64 {
			if r.Forecast == nil {
				return -1
			}
			return r.Forecast.Projected
		},
	}[sort]
	if key != nil {
		slices.SortStableFunc(rows, func(a, b teamRow) int { return cmp.Compare(key(b), key(a)) })
	}
	return rows
}

// budgetRows are the dollar and token budgets of an org (team "") or a
// team with what they have used and the alerts of their period.
func (a *API) budgetRows(ctx context.Context, org, team string) ([]budgetRow, error) {
	limits, _, _ := a.budgets(org, team, "")
	views, err := a.ceilingViews(ctx, limits)
	if err != nil {
		return nil, err
	}
	rows := make([]budgetRow, len(limits))
	for i, l := range limits {
		rows[i] = budgetRow{Org: org, Team: team, CeilingView: views[i], USD: l.Unit == budget.Microdollars,
			HConfigured: l.Format(l.Amount), HIn: l.Format(views[i].InForce), HUsed: l.Format(views[i].Used)}
		period := budget.PeriodID(l.Period, a.now(), l.Location)
		for _, th := range a.config().Alerts.Thresholds {
			n, _, err := a.engine.Count(ctx, l.Partition, policy.AlertFired(policy.AlertID(l, period, th)), 0, policy.AlertClaimTTL(l, a.now()))
			if err != nil {
				return nil, err
			}
			rows[i].Alerts = append(rows[i].Alerts, alertRow{Threshold: th, Fired: n})
		}
	}
	return rows, nil
}

// daysOf are the dates of the month starting at start.
func daysOf(start time.Time) []string {
	var days []string
	for d := start; d.Before(start.AddDate(0, 1, 0)); d = d.AddDate(0, 0, 1) {
		days = append(days, d.Format("2006-01-02"))
	}
	return days
}

// stacked draws rows (grouped by name and day) as daily bars stacked by
// name: the seven largest and "other".
func stacked(id, title string, days []string, rows []Row, name func(Row) string) template.HTML {
	totals := map[string]int64{}
	for _, r := range rows {
		totals[name(r)] += int64(r.USDMicros)
	}
	names := make([]string, 0, len(totals))
	for n := range totals {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int {
		if totals[x] != totals[y] {
			return int(totals[y] - totals[x])
		}
		return strings.Compare(x, y)
	})
	keep := min(len(names), len(palette)-1)
	index := map[string]int{}
	c := chart{ID: id, Title: title, Labels: make([]string, len(days)), Tips: days}
	for i, n := range names[:keep] {
		index[n] = i
		c.Bars = append(c.Bars, series{Name: n, Color: palette[i], Values: make([]int64, len(days))})
	}
	if len(names) > keep {
		index["\x00other"] = keep
		c.Bars = append(c.Bars, series{Name: "other", Color: palette[len(palette)-1], Values: make([]int64, len(days))})
	}
	day := map[string]int{}
	for i, d := range days {
		day[d] = i
		c.Labels[i] = strings.TrimLeft(d[8:], "0")
	}
	for _, r := range rows {
		i, ok := index[name(r)]
		if !ok {
			i = index["\x00other"]
		}
		if j, ok := day[r.Group["day"]]; ok {
			c.Bars[i].Values[j] += int64(r.USDMicros)
		}
	}
	return c.SVG()
}

// cumulative draws a team's spend summed day by day, its ceiling, and the
// forecast's line to the month's end.
func cumulative(days []string, rows []Row, ceiling int64, f *Forecast, start time.Time) template.HTML {
	c := chart{ID: "cumulative", Title: "Spend so far against the ceiling", Labels: make([]string, len(days)), Tips: days}
	daily := make([]int64, len(days))
	for _, r := range rows {
		if i := slices.Index(days, r.Group["day"]); i >= 0 {
			daily[i] += int64(r.USDMicros)
		}
	}
	sum := series{Name: "spent", Color: palette[0], Values: make([]int64, len(days))}
	var run int64
	for i := range days {
		c.Labels[i] = strings.TrimLeft(days[i][8:], "0")
		run += daily[i]
		sum.Values[i] = run
	}
	if f != nil {
		sum.Len = min(len(days), int(f.Now.Sub(start).Hours()/24)+1)
		proj := series{Name: "forecast at this rate", Color: palette[1], Dashed: true, Values: make([]int64, len(days))}
		for i := range days {
			proj.Values[i] = mulDiv(f.Spent, int64(i+1)*86400, max(1, f.Elapsed), false)
		}
		c.Lines = append(c.Lines, proj)
	}
	c.Lines = append([]series{sum}, c.Lines...)
	if ceiling > 0 {
		line := series{Name: "ceiling " + budget.Money(ceiling).Dollars(), Color: "#d04a4a", Values: make([]int64, len(days))}
		for i := range days {
			line.Values[i] = ceiling
		}
		c.Lines = append(c.Lines, line)
	}
	return c.SVG()
}

// csrfOf is the form token of the caller's admin token: an HMAC of it, so
// every instance computes the same one and a page of another site, which
// cannot read the page, cannot forge it.
func csrfOf(c echo.Context) string {
	raw, _ := c.Get(rawTokenKey).(string)
	m := hmac.New(sha256.New, []byte(raw))
	m.Write([]byte("tollgate admin form"))
	return hex.EncodeToString(m.Sum(nil))
}

// render writes template name with d.
func render(c echo.Context, status int, name string, d any) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return pageTmpl.ExecuteTemplate(c.Response(), name, d)
}

// auditPage answers GET /admin/audit?org=O: every change of the org —
// ceilings, freezes, resets, keys — newest first, with who made it and
// why, its amounts in each budget's unit. For admins and finance, as the
// audit trail is.
func (a *API) auditPage(c echo.Context) error {
	org := c.QueryParam("org")
	var o *config.Org
	for i := range a.config().Orgs {
		if a.config().Orgs[i].ID == org {
			o = &a.config().Orgs[i]
		}
	}
	if o == nil {
		return fail(c, http.StatusNotFound, "not_found", "No such org: give ?org=.")
	}
	trail, err := a.trail.List(c.Request().Context())
	if err != nil {
		return err
	}
	limits, _, _ := a.budgets(org, "", "")
	for _, team := range o.Teams {
		tl, _, _ := a.budgets(org, team.ID, "")
		limits = append(limits, tl...)
		for _, k := range team.Keys {
			kl, _, _ := a.budgets(org, team.ID, k.ID)
			limits = append(limits, kl...)
		}
	}
	rows := changesOf(trail, limits, org+"/", -1)
	return render(c, http.StatusOK, "audit", map[string]any{"Org": org, "Rows": rows})
}

// history is the newest 50 changes of limits in the trail, their amounts
// in each limit's unit.
func history(trail []auditEntry, limits []budget.Limit) []historyRow {
	return changesOf(trail, limits, "", 50)
}

// changesOf are the changes in the trail of limits — and, with keys a
// prefix ("acme/"), of the keys it starts — newest first, at most n (-1:
// all), their amounts in each limit's unit.
func changesOf(trail []auditEntry, limits []budget.Limit, keys string, n int) []historyRow {
	byBucket := map[string]budget.Limit{}
	for _, l := range limits {
		byBucket[l.Bucket] = l
	}
	var out []historyRow
	for i := len(trail) - 1; i >= 0 && (n < 0 || len(out) < n); i-- {
		e := trail[i]
		bucket := e.Target
		if e.Action == "reset_period" {
			bucket = bucket[:max(0, strings.LastIndex(bucket, ":"))] // "<bucket>:<period>"
		}
		l, ok := byBucket[bucket]
		if !ok {
			if keys != "" && (e.Action == "create_key" || e.Action == "revoke_key") && strings.HasPrefix(e.Target, keys) {
				out = append(out, historyRow{auditEntry: e})
			}
			continue
		}
		row := historyRow{auditEntry: e}
		if v, ok := amountOf(e.Old); ok {
			row.HOld = l.Format(v)
		}
		if v, ok := amountOf(e.New); ok {
			row.HNew = l.Format(v)
		}
		out = append(out, row)
	}
	return out
}

// thousands writes n with its thousands separated: 3,139,343.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

package admin

import (
	"context"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// cookieName carries an admin token for the web page (set from ?token=,
// HttpOnly, same site).
const cookieName = "tollgate_admin"

// teamBar is one team's month on the page.
type teamBar struct {
	Org, Team     string
	Spent         budget.Money
	Ceiling       budget.Money // 0: no dollar budget
	Percent       float64
	Width, Length int
}

type pageData struct {
	Month    string
	Team     string // drill-down: org/team
	Teams    []teamBar
	Days     []Row
	DayBars  []dayBar
	Models   []Row
	Keys     []Row
	Total    budget.Money
	CSV      string
	Viewer   string
	Generate time.Time
}

type dayBar struct {
	X, Y, H int
	Day     string
	USD     string
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"usd":    func(m budget.Money) string { return strings.TrimPrefix(m.String(), "$") },
	"micros": func(m budget.Money) int64 { return int64(m) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tollgate — spend {{.Month}}</title>
<style>
body{font:14px system-ui,sans-serif;margin:2rem;color:#222}h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse}td,th{padding:.25rem .75rem;text-align:right}td:first-child,th:first-child{text-align:left}
.bar{fill:#4a7bd0}.over{fill:#d04a4a}.muted{color:#777}a{color:#2a5db0}
</style></head><body>
<h1>Spend in {{.Month}}{{if .Team}} — {{.Team}}{{end}}</h1>
<p class="muted">Total <strong id="total" data-usd-micros="{{micros .Total}}">${{usd .Total}}</strong> · <a id="csv" href="{{.CSV}}">download CSV</a>{{if .Team}} · <a href="?month={{.Month}}">all teams</a>{{end}}</p>
<h2>Teams: spend against their monthly ceiling</h2>
<table id="teams"><tr><th>team</th><th>spent</th><th>ceiling</th><th>used</th><th></th></tr>
{{range .Teams}}<tr class="team" data-team="{{.Org}}/{{.Team}}" data-usd-micros="{{micros .Spent}}">
<td><a href="?month={{$.Month}}&amp;team={{.Org}}/{{.Team}}">{{.Org}}/{{.Team}}</a></td><td>${{usd .Spent}}</td>
<td>{{if .Ceiling}}${{usd .Ceiling}}{{else}}—{{end}}</td><td>{{if .Ceiling}}{{printf "%.1f" .Percent}}%{{end}}</td>
<td><svg width="300" height="14"><rect width="300" height="14" fill="#eee"/><rect class="{{if ge .Percent 100.0}}over{{else}}bar{{end}}" width="{{.Length}}" height="14"/></svg></td></tr>
{{end}}</table>
<h2>Daily spend</h2>
<svg id="days" width="760" height="160" role="img" aria-label="daily spend">
{{range .DayBars}}<rect class="bar" x="{{.X}}" y="{{.Y}}" width="20" height="{{.H}}"><title>{{.Day}}: ${{.USD}}</title></rect>{{end}}
<line x1="0" y1="150" x2="760" y2="150" stroke="#999"/></svg>
<h2>Top models</h2><table id="models"><tr><th>model</th><th>requests</th><th>spent</th></tr>
{{range .Models}}<tr data-model="{{index .Group "model"}}" data-usd-micros="{{micros .USDMicros}}"><td>{{index .Group "model"}}</td><td>{{.Requests}}</td><td>${{.USD}}</td></tr>{{end}}</table>
<h2>Top keys</h2><table id="keys"><tr><th>key</th><th>team</th><th>requests</th><th>spent</th></tr>
{{range .Keys}}<tr><td>{{index .Group "key"}}</td><td>{{index .Group "team"}}</td><td>{{.Requests}}</td><td>${{.USD}}</td></tr>{{end}}</table>
<p class="muted">Signed in as {{.Viewer}} · generated {{.Generate.Format "2006-01-02 15:04:05 MST"}} · figures from the ledger</p>
</body></html>`))

// page serves the finance page at /admin/: this month's spend against each
// team's ceiling, the daily trend, top models and keys, a drill-down into
// one team and a CSV download. Server-rendered HTML with inline SVG: no
// script, no CDN, works offline.
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
	loc, _ := time.LoadLocation(a.cfg.TimeZone) // validated with the config
	calendar, err := a.calendar("")
	if err != nil {
		return err
	}
	month := c.QueryParam("month")
	start, err := time.Parse("2006-01", month)
	if err != nil {
		now := time.Now().In(loc)
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		month = start.Format("2006-01")
	}
	end := start.AddDate(0, 1, 0)
	only := c.QueryParam("team")
	if only != "" {
		org, team, _ := strings.Cut(only, "/")
		if !sees(t, org, team) {
			return fail(c, http.StatusNotFound, "not_found", "No such team.")
		}
	}
	filter := teamsFor(t, only)
	byTeam, err := Report(c.Request().Context(), a.ledger, start, end, []string{"org", "team"}, calendar, filter)
	if err != nil {
		return err
	}
	days, _ := Report(c.Request().Context(), a.ledger, start, end, []string{"day"}, calendar, filter)
	models, _ := Report(c.Request().Context(), a.ledger, start, end, []string{"model"}, calendar, filter)
	keys, _ := Report(c.Request().Context(), a.ledger, start, end, []string{"team", "key"}, calendar, filter)
	byUSD := func(x, y Row) int { return int(y.USDMicros - x.USDMicros) }
	slices.SortFunc(models, byUSD)
	slices.SortFunc(keys, byUSD)
	models, keys = models[:min(len(models), 10)], keys[:min(len(keys), 10)]

	d := pageData{Month: month, Team: only, Days: days, Models: models, Keys: keys, Viewer: t.Name, Generate: time.Now().In(loc),
		CSV: "/admin/v1/reports?" + "month=" + month + "&by=team,model&format=csv"}
	if only != "" {
		d.CSV += "&team=" + only
	}
	d.Teams, d.Total = a.teamBars(c.Request().Context(), t, only, byTeam)
	d.DayBars = dayBars(days, loc)
	c.Response().Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	c.Response().Header().Set("Content-Type", "text/html; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	return pageTmpl.Execute(c.Response(), d)
}

// teamBars are the month's spend of every team t may see (only one, when
// only names it) against its monthly dollar ceiling, and their total.
func (a *API) teamBars(ctx context.Context, t config.AdminToken, only string, byTeam []Row) ([]teamBar, budget.Money) {
	spent := map[string]budget.Money{}
	var total budget.Money
	for _, r := range byTeam {
		spent[r.Group["org"]+"/"+r.Group["team"]] = r.USDMicros
		total += r.USDMicros
	}
	var bars []teamBar
	for _, o := range a.cfg.Orgs {
		for _, tm := range o.Teams {
			id := o.ID + "/" + tm.ID
			if !sees(t, o.ID, tm.ID) || (only != "" && id != only) {
				continue
			}
			bar := teamBar{Org: o.ID, Team: tm.ID, Spent: spent[id]}
			limits, _, _ := a.budgets(o.ID, tm.ID, "")
			for _, b := range limits {
				if b.Unit == budget.Microdollars && b.Period == budget.Month {
					if st, err := a.engine.Peek(ctx, []budget.Limit{b}); err == nil {
						bar.Ceiling = budget.Money(st[0].Capacity)
					}
				}
			}
			if bar.Ceiling > 0 {
				bar.Percent = 100 * float64(bar.Spent) / float64(bar.Ceiling)
				bar.Length = int(min(bar.Percent, 100) * 3)
			}
			bars = append(bars, bar)
		}
	}
	return bars, total
}

// dayBars are the daily chart's bars, scaled to the busiest day.
func dayBars(days []Row, loc *time.Location) []dayBar {
	var peak budget.Money = 1
	for _, r := range days {
		peak = max(peak, r.USDMicros)
	}
	var bars []dayBar
	for _, r := range days {
		day, _ := time.ParseInLocation("2006-01-02", r.Group["day"], loc)
		h := int(140 * float64(r.USDMicros) / float64(peak))
		bars = append(bars, dayBar{X: (day.Day() - 1) * 24, Y: 150 - h, H: h, Day: r.Group["day"], USD: r.USD})
	}
	return bars
}

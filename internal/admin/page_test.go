package admin_test

import (
	"context"
	"encoding/csv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/topk"
	"github.com/tollgate-dev/tollgate/policy"
)

// financePage is an admin API on the embedded store whose clock the test
// moves, over a ledger with November and December spend of acme/ml
// (a $800 monthly ceiling in the config).
type financePage struct {
	e      *echo.Echo
	now    atomic.Pointer[time.Time]
	trail  *audit.File
	cfg    *config.Config
	engine *budget.Engine
}

func newFinancePage(t *testing.T) *financePage {
	t.Helper()
	c, err := config.Parse([]byte(`
time_zone: UTC
admin_tokens: [{name: cfo, hash: "`+policy.HashKey("tg-cfo")+`", role: finance}, {name: eve, hash: "`+policy.HashKey("tg-viewer")+`", role: viewer, teams: [acme/search]}]
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$1", max_output_tokens: 10}}
orgs: [{id: acme, teams: [{id: ml, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$800", period: month}]},
                          {id: search, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$50", period: month}]}]},
       {id: berlin, time_zone: Europe/Berlin, teams: [{id: ops, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}]}]}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var entries []budget.Entry
	for day := 1; day <= 30; day++ { // November: $10 a day
		entries = append(entries, budget.Entry{Org: "acme", Team: "ml", Key: "k", Model: "m", Time: time.Date(2026, 11, day, 12, 0, 0, 0, time.UTC), Cost: 10 * budget.Dollar, Served: true})
	}
	for day := 1; day <= 10; day++ { // December's first ten days: $60 a day
		entries = append(entries, budget.Entry{Org: "acme", Team: "ml", Key: "k", Model: "m", Time: time.Date(2026, 12, day, 12, 0, 0, 0, time.UTC), Cost: 60 * budget.Dollar, Served: true})
	}
	for i := range entries {
		entries[i].RequestID = strconv.Itoa(i)
		entries[i].Usage = budget.Usage{InputTokens: 100, OutputTokens: 10}
	}
	c.LedgerPath = writeLedger(t, entries)
	p := &financePage{e: echo.New(), trail: audit.NewFile(filepath.Join(t.TempDir(), "audit.jsonl")), cfg: c}
	p.at(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	mem, err := memstore.New(memstore.Options{Now: func() time.Time { return *p.now.Load() }}) // the page's clock
	if err != nil {
		t.Fatal(err)
	}
	p.engine = budget.NewEngine(mem, 0)
	admin.New(c, p.engine, slog.New(slog.DiscardHandler)).WithAudit(p.trail).WithClock(func() time.Time { return *p.now.Load() }).Mount(p.e)
	return p
}

func (p *financePage) at(t time.Time) { p.now.Store(&t) }

// do sends a request with a bearer token (or, with cookie, the page's
// cookie) and returns the answer.
func (p *financePage) do(method, target, token string, cookie bool, form url.Values, header ...string) *httptest.ResponseRecorder {
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	if cookie {
		req.AddCookie(&http.Cookie{Name: "tollgate_admin", Value: token})
	} else {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	p.e.ServeHTTP(rec, req)
	return rec
}

func attr(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in the page", name)
	}
	return m[1]
}

// Past months show the ceiling then in force, from the audit trail; this
// month's forecast is the hand computation; the statement says the same.
func TestFinancePageHistoryAndForecast(t *testing.T) {
	p := newFinancePage(t)
	// On 2 December finance raises ml's ceiling from $800 to $1,200.
	if rec := p.do(http.MethodPut, "/admin/v1/ceilings", "tg-cfo", false, nil); rec.Code != http.StatusBadRequest {
		t.Fatalf("an empty change: %d", rec.Code)
	}
	req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(`{"org":"acme","team":"ml","name":"usd-month","amount":"$1,200"}`))
	req.Header.Set("Authorization", "Bearer tg-cfo")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	p.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("raise: %d %s", rec.Code, rec.Body)
	}

	p.at(time.Date(2026, 12, 11, 0, 0, 0, 0, time.UTC)) // ten days of December gone
	// The 50 % alert went out this period (the gateway counts it so).
	ml, _ := policy.ScopeLimits(p.cfg, "acme", "ml")
	if _, _, err := p.engine.Count(context.Background(), "acme", policy.AlertFired(policy.AlertID(ml[0], "2026-12", 50)), 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	nov := p.do(http.MethodGet, "/admin/?month=2026-11", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(nov, `data-team="acme/ml" data-usd-micros="300000000" data-ceiling-micros="800000000"`) || !strings.Contains(nov, "(then)") {
		t.Fatalf("November does not show its $800 ceiling:\n%s", nov)
	}
	dec := p.do(http.MethodGet, "/admin/?month=2026-12&team=acme/ml", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(dec, `<span class="fired" data-threshold="50">50%</span>`) || strings.Contains(dec, `data-threshold="80"`) {
		t.Errorf("alerts fired this period:\n%s", dec)
	}
	if !strings.Contains(dec, `data-team="acme/ml" data-usd-micros="600000000" data-ceiling-micros="1200000000"`) {
		t.Fatalf("December's row:\n%s", dec)
	}
	// By hand: $600 in 10 days of a 31-day month → $600 × 31 / 10 =
	// $1,860 at the month's end; $1,200 is met after 10 × 1200 / 600 = 20
	// days: on 21 December at midnight.
	if got := attr(t, dec, "data-projected-micros"); got != "1860000000" {
		t.Errorf("projected %s µ$, want 1860000000", got)
	}
	if got := attr(t, dec, "data-met-at"); got != strconv.FormatInt(time.Date(2026, 12, 21, 0, 0, 0, 0, time.UTC).Unix(), 10) {
		t.Errorf("met at %s", got)
	}
	if attr(t, dec, "data-elapsed-seconds") != "864000" || attr(t, dec, "data-month-seconds") != "2678400" {
		t.Errorf("elapsed %s of %s", attr(t, dec, "data-elapsed-seconds"), attr(t, dec, "data-month-seconds"))
	}
	if !strings.Contains(dec, "$1,860.00") || !strings.Contains(dec, "the ceiling is met on 2026-12-21 00:00 UTC") || !strings.Contains(dec, "($60.00 a day)") {
		t.Errorf("the forecast's words:\n%s", dec)
	}
	// The history names the change; the charts have axes with dollar ticks
	// and a slot per day.
	if !strings.Contains(dec, `data-action="set_ceiling" data-target="team:acme/ml:usd-month"`) || !strings.Contains(dec, "$800.00</td><td class=\"num\">$1,200.00") {
		t.Errorf("history:\n%s", dec)
	}
	if n := strings.Count(nov, `class="tick x"`); n != 30*2 { // November, two charts on the overview
		t.Errorf("%d x ticks in November's two charts", n)
	}
	if !strings.Contains(nov, `data-usd-micros="10000000">$10</text>`) {
		t.Errorf("no $10 tick on November's charts")
	}

	// The statement: November's spend and the $800 then in force.
	st := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=ml&month=2026-11&format=csv", "tg-cfo", false, nil)
	recs, err := csv.NewReader(st.Body).ReadAll()
	if err != nil || st.Code != 200 {
		t.Fatalf("statement: %d %v", st.Code, err)
	}
	want := [][]string{
		{"month", "org", "team", "section", "item", "requests", "input_tokens", "cached_input_tokens", "output_tokens", "usd_micros", "usd"},
		{"2026-11", "acme", "ml", "model", "m", "30", "3000", "0", "300", "300000000", "300.00"},
		{"2026-11", "acme", "ml", "key", "acme/ml/k", "30", "3000", "0", "300", "300000000", "300.00"},
		{"2026-11", "acme", "ml", "total", "", "30", "3000", "0", "300", "300000000", "300.00"},
		{"2026-11", "acme", "ml", "ceiling", "in force at month end", "", "", "", "", "800000000", "800.00"},
	}
	if len(recs) != len(want) {
		t.Fatalf("statement %v", recs)
	}
	for i := range want {
		if strings.Join(recs[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("statement line %d: %v, want %v", i, recs[i], want[i])
		}
	}
	html := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=ml&month=2026-12", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(html, `id="statement-total" data-usd-micros="600000000">$600.00`) || !strings.Contains(html, `id="statement-ceiling">$1,200.00`) {
		t.Errorf("December's printable statement:\n%s", html)
	}
	if rec := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=ml&month=2026-11", "tg-viewer", false, nil); rec.Code != http.StatusNotFound {
		t.Errorf("a viewer read another team's statement: %d", rec.Code)
	}
}

// The page's forms: a cookie session needs the CSRF token and the page's
// own origin; a cut that the rule asks about is confirmed on a second
// page; viewers have no forms and may not post.
func TestFinanceFormsAreProtectedAndConfirmed(t *testing.T) {
	p := newFinancePage(t)
	page := p.do(http.MethodGet, "/admin/?team=acme/ml", "tg-cfo", true, nil).Body.String()
	csrf := attr(t, page, `name="csrf" value`)
	form := url.Values{"org": {"acme"}, "team": {"ml"}, "name": {"usd-month"}, "amount": {"$700"}, "csrf": {csrf}}
	for name, rec := range map[string]*httptest.ResponseRecorder{
		"no token":      p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, url.Values{"org": {"acme"}, "team": {"ml"}, "name": {"usd-month"}, "amount": {"$700"}}),
		"another's":     p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, url.Values{"org": {"acme"}, "team": {"ml"}, "name": {"usd-month"}, "amount": {"$700"}, "csrf": {strings.Repeat("0", 64)}}),
		"foreign page":  p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form, "Origin", "https://evil.example"),
		"viewer's form": p.do(http.MethodPost, "/admin/ceiling", "tg-viewer", true, form),
	} {
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d", name, rec.Code)
		}
	}
	if list, _ := p.trail.List(context.Background()); len(list) != 0 {
		t.Fatalf("a refused form changed something: %+v", list)
	}
	if v := p.do(http.MethodGet, "/admin/?team=acme/search", "tg-viewer", true, nil).Body.String(); strings.Contains(v, "<form method=\"post\"") || strings.Contains(v, `action="/admin/ceiling"`) {
		t.Error("a viewer's page has forms")
	}
	// A cut within half goes through and returns to the team's page.
	rec := p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form, "Origin", "http://example.com")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/?changed=1&team=acme%2Fml" {
		t.Fatalf("set: %d %s %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	// By more than half: a confirm page, nothing changed yet.
	form.Set("amount", "$100")
	rec = p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form)
	body := rec.Body.String()
	if rec.Code != http.StatusConflict || !strings.Contains(body, "This cuts usd-month from $700.00 to $100.00, by more than half.") ||
		!strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("confirm page: %d\n%s", rec.Code, body)
	}
	if list, _ := p.trail.List(context.Background()); len(list) != 1 {
		t.Fatalf("the unconfirmed cut was audited: %+v", list)
	}
	form.Set("confirm", "yes")
	if rec := p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form); rec.Code != http.StatusSeeOther {
		t.Fatalf("confirmed: %d %s", rec.Code, rec.Body)
	}
	list, _ := p.trail.List(context.Background())
	if len(list) != 2 || list[1].Who != "cfo" || list[1].Target != "team:acme/ml:usd-month" {
		t.Fatalf("audit %+v", list)
	}
	if v, _ := list[1].New.(float64); v != 100_000_000 {
		t.Fatalf("audit %+v", list[1])
	}
	// A bare number on the form is refused with the fix, nothing changed.
	form.Set("amount", "1200")
	rec = p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "is ambiguous: write &#34;$1200&#34;") {
		t.Fatalf("a bare number: %d %s", rec.Code, rec.Body)
	}
	// The JSON API's 409 carries the figures.
	req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(`{"org":"acme","team":"ml","name":"usd-month","amount":"$10"}`))
	req.Header.Set("Authorization", "Bearer tg-cfo")
	req.Header.Set("Content-Type", "application/json")
	jrec := httptest.NewRecorder()
	p.e.ServeHTTP(jrec, req)
	if jrec.Code != http.StatusConflict || !strings.Contains(jrec.Body.String(), `"code":"confirmation_required"`) || !strings.Contains(jrec.Body.String(), `"new":10000000`) ||
		!strings.Contains(jrec.Body.String(), `"old":100000000`) {
		t.Fatalf("API: %d %s", jrec.Code, jrec.Body)
	}
}

// The page's period reset is asked about first: it lets the team spend a
// second ceiling's worth this period. The confirm page needs a reason;
// the reset is audited with it and listed in the month's statement.
func TestAPeriodResetIsConfirmedWithAReason(t *testing.T) {
	p := newFinancePage(t)
	page := p.do(http.MethodGet, "/admin/?team=acme/ml", "tg-cfo", true, nil).Body.String()
	form := url.Values{"org": {"acme"}, "team": {"ml"}, "name": {"usd-month"}, "csrf": {attr(t, page, `name="csrf" value`)}}
	rec := p.do(http.MethodPost, "/admin/reset", "tg-cfo", true, form)
	body := rec.Body.String()
	if rec.Code != http.StatusConflict || !strings.Contains(body, "spend its whole") || !strings.Contains(body, `name="reason" required`) {
		t.Fatalf("reset page: %d\n%s", rec.Code, body)
	}
	form.Set("confirm", "yes") // confirmed, but no reason: asked again
	if rec := p.do(http.MethodPost, "/admin/reset", "tg-cfo", true, form); rec.Code != http.StatusConflict {
		t.Fatalf("a reset without a reason: %d", rec.Code)
	}
	if list, _ := p.trail.List(context.Background()); len(list) != 0 {
		t.Fatalf("an unconfirmed reset was audited: %+v", list)
	}
	form.Set("reason", "double-billed by a retry storm")
	if rec := p.do(http.MethodPost, "/admin/reset", "tg-cfo", true, form); rec.Code != http.StatusSeeOther {
		t.Fatalf("confirmed: %d %s", rec.Code, rec.Body)
	}
	list, _ := p.trail.List(context.Background())
	if len(list) != 1 || list[0].Action != "reset_period" || list[0].Reason != "double-billed by a retry storm" || list[0].Who != "cfo" {
		t.Fatalf("audit %+v", list)
	}
	st := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=ml&month=2026-12&format=json", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(st, `"action":"reset_period"`) || !strings.Contains(st, `"reason":"double-billed by a retry storm"`) {
		t.Fatalf("the statement does not list the reset: %s", st)
	}
}

// A temporary change's date on the page ends as that day ends on the
// budget's own calendar: a Berlin budget's top-up "until 31 December"
// lapses at midnight in Berlin (23:00 UTC), not at midnight UTC.
func TestAFormsUntilDateIsTheBudgetsOwnDay(t *testing.T) {
	p := newFinancePage(t)
	page := p.do(http.MethodGet, "/admin/?team=berlin/ops", "tg-cfo", true, nil).Body.String()
	form := url.Values{"org": {"berlin"}, "team": {"ops"}, "name": {"usd-month"}, "amount": {"$150"}, "until": {"2026-12-31"}, "csrf": {attr(t, page, `name="csrf" value`)}}
	if rec := p.do(http.MethodPost, "/admin/ceiling", "tg-cfo", true, form); rec.Code != http.StatusSeeOther {
		t.Fatalf("set: %d %s", rec.Code, rec.Body)
	}
	list, _ := p.trail.List(context.Background())
	if len(list) != 1 || list[0].Until == nil || !list[0].Until.Equal(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)) {
		t.Fatalf("audit %+v: want the change to lapse at 2026-12-31T23:00Z (midnight in Berlin)", list)
	}
}

// A team frozen at $0 shows a ceiling of $0.00, frozen, and its spend as
// over it — not "no ceiling" beside the money it spent.
func TestAFrozenTeamIsShownFrozen(t *testing.T) {
	p := newFinancePage(t)
	req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(`{"org":"acme","team":"ml","name":"usd-month","amount":"$0","confirm":true}`))
	req.Header.Set("Authorization", "Bearer tg-cfo")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	p.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("freeze: %d %s", rec.Code, rec.Body)
	}
	page := p.do(http.MethodGet, "/admin/", "tg-cfo", true, nil).Body.String()
	i := strings.Index(page, `data-team="acme/ml"`)
	if i < 0 {
		t.Fatalf("no ml row:\n%s", page)
	}
	row := page[i:]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `data-ceiling-micros="0"`) || !strings.Contains(row, "$0.00") || !strings.Contains(row, "frozen") || !strings.Contains(row, "over") || strings.Contains(row, "—") {
		t.Fatalf("the frozen team's row:\n%s", row)
	}
}

// The page is laid out for the width it is read at: a phone gets the
// page at its own width (a viewport), wide tables scrolling inside it.
func TestThePageHasAViewport(t *testing.T) {
	p := newFinancePage(t)
	page := p.do(http.MethodGet, "/admin/", "tg-cfo", true, nil).Body.String()
	if !strings.Contains(page, `<meta name="viewport" content="width=device-width, initial-scale=1">`) || !strings.Contains(page, "@media (max-width:700px)") {
		t.Fatal("the page has no viewport for phones")
	}
}

// A past month's page shows what was spent against what was in force
// then, without today's budgets and their forms: a change made there
// would change this month's.
func TestAPastMonthHasNoLiveForms(t *testing.T) {
	p := newFinancePage(t)
	for _, target := range []string{"/admin/?month=2026-11", "/admin/?month=2026-11&team=acme/ml"} {
		page := p.do(http.MethodGet, target, "tg-cfo", true, nil).Body.String()
		if strings.Contains(page, `action="/admin/ceiling"`) || strings.Contains(page, `action="/admin/reset"`) || !strings.Contains(page, `data-team="acme/ml"`) {
			t.Errorf("%s: a past month's page with live forms, or without its teams", target)
		}
	}
	if page := p.do(http.MethodGet, "/admin/?team=acme/ml", "tg-cfo", true, nil).Body.String(); !strings.Contains(page, `action="/admin/ceiling"`) {
		t.Error("this month's page has no forms")
	}
}

// Finance adds to a budget without working out the figure: "+$100" adds
// to the amount in force, "-$50" takes from it, and until "period_end"
// lapses as the budget's period ends (back to what was in force before).
func TestARelativeChangeUntilThePeriodEnds(t *testing.T) {
	p := newFinancePage(t)
	put := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tg-cfo")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		p.e.ServeHTTP(rec, req)
		return rec
	}
	if rec := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"+$100"}`); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"old":800000000,"new":900000000`) {
		t.Fatalf("+$100: %d %s", rec.Code, rec.Body)
	}
	rec := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"+$100","until":"period_end"}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"new":1000000000`) || !strings.Contains(rec.Body.String(), `"until":"2027-01-01T00:00:00Z"`) {
		t.Fatalf("+$100 until the period ends: %d %s", rec.Code, rec.Body)
	}
	if rec := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"-$5000","confirm":true}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "below zero") {
		t.Fatalf("-$5000: %d %s", rec.Code, rec.Body)
	}
	// (What it lapses to is the store contract's: temporaryOverAnOverride.)
}

// GET /admin/v1/refused-keys lists the sketch's top, n at most.
func TestRefusedKeysEndpoint(t *testing.T) {
	c, err := config.Parse([]byte(`
admin_tokens: [{name: cfo, hash: "`+policy.HashKey("tg-cfo")+`", role: finance}]
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$1", max_output_tokens: 10}}
orgs: [{id: acme, teams: [{id: ml}]}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s := topk.New(10)
	for i := range 7 {
		for range i + 1 {
			s.Add("acme/k" + strconv.Itoa(i))
		}
	}
	e := echo.New()
	admin.New(c, nil, slog.New(slog.DiscardHandler)).WithRefusedKeys(s.Top).Mount(e)
	get := func(q string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/admin/v1/refused-keys"+q, nil)
		req.Header.Set("Authorization", "Bearer tg-cfo")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	if rec := get("?n=2"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"keys":[{"key":"acme/k6","count":7,"overcount_at_most":0},{"key":"acme/k5","count":6,"overcount_at_most":0}]`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := get("?n=0"); rec.Code != http.StatusBadRequest {
		t.Fatalf("n=0: %d", rec.Code)
	}
}

// The org's changes on one page: every team's and the org's, with who and
// why, newest first — not another org's; for finance and admins only.
func TestTheOrgsChangesOnOnePage(t *testing.T) {
	p := newFinancePage(t)
	put := func(body string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tg-cfo")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		p.e.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
	put(`{"org":"acme","team":"ml","name":"usd-month","amount":"$900","reason":"Q4 launch"}`)
	put(`{"org":"acme","team":"search","name":"usd-month","amount":"freeze","confirm":true,"reason":"runaway crawler"}`)
	put(`{"org":"berlin","team":"ops","name":"usd-month","amount":"$120","reason":"not acme's"}`)
	rec := p.do(http.MethodGet, "/admin/audit?org=acme", "tg-cfo", true, nil)
	page := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, page)
	}
	freeze, set := strings.Index(page, `data-action="freeze"`), strings.Index(page, `data-action="set_ceiling"`)
	if freeze < 0 || set < 0 || freeze > set {
		t.Fatalf("want the freeze, then (older) the $900:\n%s", page)
	}
	for _, want := range []string{"runaway crawler", "Q4 launch", "$800.00", "$900.00", "cfo"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "not acme's") {
		t.Fatal("another org's change on acme's page")
	}
	if rec := p.do(http.MethodGet, "/admin/audit?org=acme", "tg-viewer", true, nil); rec.Code != http.StatusForbidden {
		t.Fatalf("a viewer: %d", rec.Code)
	}
	if rec := p.do(http.MethodGet, "/admin/audit?org=nope", "tg-cfo", true, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("an unknown org: %d", rec.Code)
	}
	st := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=search&month=2026-12&format=json", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(st, `"action":"freeze"`) || !strings.Contains(st, `"reason":"runaway crawler"`) {
		t.Fatalf("the statement does not list the freeze: %s", st)
	}
	if main := p.do(http.MethodGet, "/admin/", "tg-cfo", true, nil).Body.String(); !strings.Contains(main, `href="/admin/audit?org=acme"`) {
		t.Fatal("no link to the org's changes on the page")
	}
}

// The team table sorts by spend, use or forecast, and shows the teams at
// risk only: ml, $600 of $800 spent by 11 December at $60 a day (on course
// for $1,800), is; search and ops, with nothing spent, are not.
func TestTheTeamTableSortsAndShowsTheTeamsAtRisk(t *testing.T) {
	p := newFinancePage(t)
	p.at(time.Date(2026, 12, 11, 9, 0, 0, 0, time.UTC))
	order := func(q string) []string {
		t.Helper()
		page := p.do(http.MethodGet, "/admin/?month=2026-12"+q, "tg-cfo", true, nil).Body.String()
		var teams []string
		for _, m := range regexp.MustCompile(`<tr class="team" data-team="([^"]+)"`).FindAllStringSubmatch(page, -1) {
			teams = append(teams, m[1])
		}
		return teams
	}
	if got := strings.Join(order(""), ","); got != "acme/ml,acme/search,berlin/ops" {
		t.Fatalf("by name: %s", got)
	}
	if got := order("&sort=spent"); got[0] != "acme/ml" {
		t.Fatalf("by spend: %v", got)
	}
	if got := strings.Join(order("&risk=1"), ","); got != "acme/ml" {
		t.Fatalf("at risk: %s, want acme/ml only", got)
	}
	page := p.do(http.MethodGet, "/admin/?month=2026-12&risk=1", "tg-cfo", true, nil).Body.String()
	if !strings.Contains(page, "1 of 3 teams at risk") {
		t.Fatalf("the at-risk view does not say how many:\n%s", page)
	}
}

// Next month's ceiling, set now: this month keeps the amount in force, the
// new one holds from the month's start — in the budget, on the page's
// history and in past months' replay; not over a temporary change.
func TestNextMonthsCeilingSetNow(t *testing.T) {
	p := newFinancePage(t)
	put := func(body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tg-cfo")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		p.e.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	inForce := func() string {
		t.Helper()
		rec := p.do(http.MethodGet, "/admin/v1/ceilings?org=acme&team=ml", "tg-cfo", false, nil)
		m := regexp.MustCompile(`"in_force":(\d+)`).FindStringSubmatch(rec.Body.String())
		if m == nil {
			t.Fatalf("ceilings: %s", rec.Body)
		}
		return m[1]
	}
	if code, body := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"$1,500","from":"period_end","reason":"2027 plan"}`); code != 200 ||
		!strings.Contains(body, `"scheduled":1500000000`) || !strings.Contains(body, `"from":"2027-01-01T00:00:00Z"`) {
		t.Fatalf("schedule: %d %s", code, body)
	}
	if got := inForce(); got != "800000000" {
		t.Fatalf("in December: %s, want the $800 in force", got)
	}
	p.at(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC))
	if got := inForce(); got != "1500000000" {
		t.Fatalf("in January: %s, want the scheduled $1,500", got)
	}
	page := p.do(http.MethodGet, "/admin/?team=acme/ml&month=2026-12", "tg-cfo", true, nil).Body.String()
	if !strings.Contains(page, `data-ceiling-micros="800000000"`) {
		t.Fatal("December's page does not show December's $800")
	}
	if !strings.Contains(page, "2027 plan") || !strings.Contains(page, `data-action="schedule_ceiling"`) {
		t.Fatal("the schedule is not in the team's history")
	}
	st := p.do(http.MethodGet, "/admin/v1/statements?org=acme&team=ml&month=2026-12&format=json", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(st, `"action":"schedule_ceiling"`) || !strings.Contains(st, `"reason":"2027 plan"`) {
		t.Fatalf("December's statement does not list the schedule: %s", st)
	}
	if code, _ := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"$2,000","for":"72h"}`); code != 200 {
		t.Fatal("a top-up")
	}
	if code, body := put(`{"org":"acme","team":"ml","name":"usd-month","amount":"$1,000","from":"period_end"}`); code != http.StatusConflict ||
		!strings.Contains(body, "temporary_change_in_force") {
		t.Fatalf("a schedule over a top-up: %d %s", code, body)
	}
}

// An org's statement in one file: every team's, one header, the org's
// total; a viewer's holds only its own teams.
func TestAnOrgsStatementInOneFile(t *testing.T) {
	p := newFinancePage(t)
	rec := p.do(http.MethodGet, "/admin/v1/statements?org=acme&month=2026-11&format=csv", "tg-cfo", false, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Disposition"), `tollgate-statement-acme-2026-11.csv`) {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	teams := map[string]bool{}
	for i, r := range rows {
		if i > 0 && r[0] == "month" {
			t.Fatal("a second header in one file")
		}
		if i > 0 {
			teams[r[2]] = true
		}
	}
	if !teams["ml"] || !teams["search"] || len(teams) != 2 {
		t.Fatalf("teams in the file: %v", teams)
	}
	js := p.do(http.MethodGet, "/admin/v1/statements?org=acme&month=2026-11&format=json", "tg-cfo", false, nil).Body.String()
	if !strings.Contains(js, `"total":{`) || !strings.Contains(js, `"usd_micros":300000000`) {
		t.Fatalf("the org's JSON statement: %s", js)
	}
	html := p.do(http.MethodGet, "/admin/v1/statements?org=acme&month=2026-11", "tg-cfo", true, nil).Body.String()
	if strings.Count(html, `class="team-statement"`) != 2 || !strings.Contains(html, `id="org-statement-total" data-usd-micros="300000000"`) {
		t.Fatalf("the org's statement page:\n%s", html)
	}
	mine := p.do(http.MethodGet, "/admin/v1/statements?org=acme&month=2026-11&format=json", "tg-viewer", false, nil).Body.String()
	if strings.Contains(mine, `"team":"ml"`) || !strings.Contains(mine, `"team":"search"`) {
		t.Fatalf("a viewer of acme/search: %s", mine)
	}
}

// Each chart has its figures behind it as a data table (a screen reader
// reads the table, not the bars), and the page has its main landmark.
func TestEachChartHasADataTable(t *testing.T) {
	p := newFinancePage(t)
	page := p.do(http.MethodGet, "/admin/?month=2026-11", "tg-cfo", true, nil).Body.String()
	if !strings.Contains(page, "<main>") || !strings.Contains(page, "</main>") {
		t.Fatal("no main landmark")
	}
	for _, id := range []string{"by-team", "by-model"} {
		i := strings.Index(page, `<table id="`+id+`-data">`)
		if i < 0 {
			t.Fatalf("no data table behind the %s chart", id)
		}
		table := page[i : i+strings.Index(page[i:], "</table>")]
		// ml spent $10 on 5 November.
		row := table[strings.Index(table, `<th scope="row">2026-11-05</th>`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, "$10.00") {
			t.Fatalf("the %s table's 5 November: %s", id, row)
		}
	}
}

package e2e_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-dev/tollgate/internal/demo"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
)

// browser is a headless Chromium tab at 1400×1000 (Debian's chromium, as
// root: no sandbox; no background traffic on a machine with no network).
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for this test (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return ctx
}

// do runs browser steps, failing the test with what step did.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func attrOf(t *testing.T, ctx context.Context, sel, name string) (string, bool) {
	t.Helper()
	r, err := chromedp.Run(ctx, chromedp.AttributeValue(sel, name))
	if err != nil {
		t.Fatalf("%s of %s: %v", name, sel, err)
	}
	return r.Value, r.Exists
}

// screenshot keeps the tab's view as name.png: in the test's directory,
// and in $TOLLGATE_SCREENSHOTS when set (docs/screenshots is made so).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil || len(png) < 10_000 {
		t.Fatalf("screenshot %s: %d bytes, %v", name, len(png), err)
	}
	for _, dir := range []string{t.TempDir(), os.Getenv("TOLLGATE_SCREENSHOTS")} {
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// reportSpend is the admin API's spend of org/team in month, by the ledger.
func reportSpend(t *testing.T, base, token, month, team string) int64 {
	t.Helper()
	_, body := adminCall(t, "GET", base+"/admin/v1/reports?month="+month+"&by=org,team&team="+team, token, "")
	var rep struct {
		Rows []struct {
			USDMicros int64 `json:"usd_micros"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("report: %v %s", err, body)
	}
	var n int64
	for _, r := range rep.Rows {
		n += r.USDMicros
	}
	return n
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// The demo's link opens the finance page in a browser with no set-up; the
// month picker and links move between months; the forecast is the hand
// computation over the figures the page shows, and the spend the ledger's;
// a ceiling changed through the form (and its confirm step) is in force
// and in the audit trail; the statement prints.
func TestDemoFinancePageInChromium(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := demo.Start(ctx, demo.Options{Listen: "127.0.0.1:0", UpstreamListen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })

	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	month, prev, prevPrev := monthStart.Format("2006-01"), monthStart.AddDate(0, -1, 0).Format("2006-01"), monthStart.AddDate(0, -2, 0).Format("2006-01")
	b := browser(t)
	do(t, b, "open the demo's link", chromedp.Navigate(d.PageURL()), chromedp.WaitVisible("#teams"))
	if n := text(t, b, "#notice"); !strings.Contains(n, "generated demo data") {
		t.Fatalf("the page does not mark its demo data: %q", n)
	}
	if loc, _ := chromedp.Run(b, chromedp.Location()); strings.Contains(loc, "token=") {
		t.Fatalf("the token stayed in the address: %s", loc)
	}
	screenshot(t, b, "finance-overview")

	// Last month through the picker: its spend is the ledger's.
	do(t, b, "pick last month", chromedp.SetValue(`#month-picker input[name=month]`, prev), chromedp.Submit(`#month-picker input[name=month]`),
		chromedp.WaitVisible(`#prev[href="?month=`+prevPrev+`"]`))
	for _, team := range []string{"demo-team", "research", "support"} {
		got, _ := attrOf(t, b, `tr[data-team="demo-org/`+team+`"]`, "data-usd-micros")
		want := reportSpend(t, d.Base, d.AdminToken, prev, "demo-org/"+team)
		if atoi(t, got) != want || want == 0 {
			t.Errorf("%s in %s: the page says %s µ$, the ledger %d", team, prev, got, want)
		}
	}
	screenshot(t, b, "finance-last-month")
	do(t, b, "back with the next link", chromedp.Click(`#next`), chromedp.WaitVisible(`#prev[href="?month=`+prev+`"]`))

	// A team's view: the forecast by hand.
	do(t, b, "open research", chromedp.Click(`a[href="?month=`+month+`&team=demo-org/research"]`), chromedp.WaitVisible("#forecast"))
	f := map[string]int64{}
	for _, k := range []string{"data-spent-micros", "data-ceiling-micros", "data-elapsed-seconds", "data-month-seconds", "data-projected-micros"} {
		v, _ := attrOf(t, b, "#forecast", k)
		f[k] = atoi(t, v)
	}
	spent, ceiling, elapsed, length := f["data-spent-micros"], f["data-ceiling-micros"], f["data-elapsed-seconds"], f["data-month-seconds"]
	if want := reportSpend(t, d.Base, d.AdminToken, month, "demo-org/research"); spent != want {
		t.Errorf("forecast from %d µ$, the ledger says %d", spent, want)
	}
	if gone := int64(time.Since(monthStart) / time.Second); elapsed > gone || elapsed < gone-120 {
		t.Errorf("elapsed %d s, the month is %d s old", elapsed, gone)
	}
	if want := int64(monthStart.AddDate(0, 1, 0).Sub(monthStart) / time.Second); length != want {
		t.Errorf("month of %d s, want %d", length, want)
	}
	// projected = spent × length ÷ elapsed; met = start + ⌈elapsed × ceiling ÷ spent⌉ s.
	projected := new(big.Int).Quo(new(big.Int).Mul(big.NewInt(spent), big.NewInt(length)), big.NewInt(elapsed)).Int64()
	if f["data-projected-micros"] != projected || ceiling != 150_000_000 {
		t.Errorf("projected %d µ$ against %d, by hand %d", f["data-projected-micros"], ceiling, projected)
	}
	metAt, met := attrOf(t, b, "#forecast", "data-met-at")
	if spent > 0 && spent < ceiling {
		n := new(big.Int).Mul(big.NewInt(elapsed), big.NewInt(ceiling))
		q, r := new(big.Int).QuoRem(n, big.NewInt(spent), new(big.Int))
		if r.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		at := monthStart.Add(time.Duration(q.Int64()) * time.Second)
		if inMonth := at.Before(monthStart.AddDate(0, 1, 0)); met != inMonth || (met && atoi(t, metAt) != at.Unix()) {
			t.Errorf("met at %q (%v), by hand %s", metAt, met, at)
		}
	}
	screenshot(t, b, "finance-team")

	// research's $150 cut to $40 — by more than half, so confirmed first.
	row := `tr[data-budget="team:demo-org/research:usd-month"]`
	do(t, b, "set $40", chromedp.SetValue(row+` input[name=amount]`, "$40"), chromedp.Click(row+` button[value=set]`), chromedp.WaitVisible("#confirm-why"))
	if why := text(t, b, "#confirm-why"); !strings.Contains(why, "This cuts usd-month from $150.00 to $40.00, by more than half.") {
		t.Fatalf("confirm step: %q", why)
	}
	screenshot(t, b, "finance-confirm")
	do(t, b, "confirm", chromedp.Click(`#confirm button`), chromedp.WaitVisible("#changed"))
	if v, _ := attrOf(t, b, row, "data-in-force"); v != "40000000" {
		t.Fatalf("in force after the change: %s", v)
	}
	if h := text(t, b, "#history tr.change"); !strings.Contains(h, "demo-admin") || !strings.Contains(h, "$150.00") || !strings.Contains(h, "$40.00") {
		t.Fatalf("history's newest row: %q", h)
	}
	_, body := adminCall(t, "GET", d.Base+"/admin/v1/audit", d.AdminToken, "")
	var trail []struct {
		Who, Action, Target string
		Old, New            int64
	}
	if err := json.Unmarshal([]byte(body), &trail); err != nil || len(trail) == 0 {
		t.Fatalf("audit: %v %s", err, body)
	}
	if last := trail[len(trail)-1]; last.Who != "demo-admin" || last.Action != "set_ceiling" || last.Target != "team:demo-org/research:usd-month" ||
		last.Old != 150_000_000 || last.New != 40_000_000 {
		t.Fatalf("audit's last change: %+v", last)
	}

	// Last month's statement, printable.
	do(t, b, "statement", chromedp.Navigate(d.Base+"/admin/v1/statements?org=demo-org&team=research&month="+prev), chromedp.WaitVisible("#statement-total"))
	if v, _ := attrOf(t, b, "#statement-total", "data-usd-micros"); atoi(t, v) != reportSpend(t, d.Base, d.AdminToken, prev, "demo-org/research") {
		t.Errorf("statement total %s", v)
	}
	if c := text(t, b, "#statement-ceiling"); c != "$100.00" {
		t.Errorf("last month's statement shows a ceiling of %s; research's was $100 then", c)
	}
	screenshot(t, b, "finance-statement")
}

// A ceiling changed through the page on one instance is in force on the
// others at once: the next request through another instance sharing
// Redis is refused, and that instance's audit trail has the change.
func TestFinanceFormReachesEveryInstanceOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`,
		redisAddr:  srv.Addr, instances: 2, spoolDir: t.TempDir(),
		topExtra: `admin_tokens: [{name: cfo, hash: "` + policy.HashKey("tg-cfo-page") + `", role: finance}, {name: root, hash: "` + policy.HashKey("tg-root-page") + `", role: admin}]` + "\n",
	})
	other := h.urls[1]
	if status, _, body, err := send(http.DefaultClient, other, chatBody(1, false)); err != nil || status != 200 {
		t.Fatalf("before: %d %s %v", status, body, err)
	}
	testkit.WaitFor(5*time.Second, func() bool {
		_, body := adminCall(t, "GET", other+"/admin/v1/ceilings?org=acme&team=ml", "tg-cfo-page", "")
		return !strings.Contains(body, `"remaining":10000000`)
	})
	b := browser(t)
	row := `tr[data-budget="team:acme/ml:usd-month"]`
	do(t, b, "open the page on the first instance", chromedp.Navigate(h.urls[0]+"/admin/?token=tg-cfo-page&team=acme/ml"), chromedp.WaitVisible(row))
	do(t, b, "freeze ml", chromedp.SetValue(row+` input[name=amount]`, "$0.000001"), chromedp.Click(row+` button[value=set]`), chromedp.WaitVisible("#confirm-why"))
	if why := text(t, b, "#confirm-why"); !strings.Contains(why, "already spent or reserved this period") {
		t.Fatalf("confirm step: %q", why)
	}
	do(t, b, "confirm", chromedp.Click(`#confirm button`), chromedp.WaitVisible("#changed"))
	status, _, body, err := send(http.DefaultClient, other, chatBody(2, false))
	if err != nil || !budgetRefused(status, body) {
		t.Fatalf("through the other instance after the change: %d %s %v", status, body, err)
	}
	_, trail := adminCall(t, "GET", other+"/admin/v1/audit", "tg-cfo-page", "")
	if !strings.Contains(trail, `"who":"cfo","action":"set_ceiling","target":"team:acme/ml:usd-month","old":10000000,"new":1`) {
		t.Fatalf("the other instance's audit trail: %s", trail)
	}

	// An admin puts the ceiling back and makes a key on the first
	// instance's page; the other instance serves it, until it is revoked
	// there too.
	do(t, b, "sign in as admin", chromedp.Navigate(h.urls[0]+"/admin/?token=tg-root-page&team=acme/ml"), chromedp.WaitVisible(row+` button[value=restore]`))
	do(t, b, "back to configured", chromedp.Click(row+` button[value=restore]`), chromedp.WaitVisible("#changed"))
	do(t, b, "new key", chromedp.SetValue(`#new-key input[name=id]`, "page-key"), chromedp.Click(`#new-key button`), chromedp.WaitVisible("#new-key-value"))
	key := text(t, b, "#new-key-value")
	// Asked directly, not by requests: refused ones count as failed
	// authentications from this address.
	knows := func() bool {
		gw := h.apps[1].Gateway()
		_, ok := gw.Lookup(gw.Settings(), key)
		return ok
	}
	if !testkit.WaitFor(5*time.Second, knows) {
		t.Fatal("the other instance never learnt the page's key")
	}
	if served, _, body, _ := sendAs(http.DefaultClient, other, key, chatBody(3, false)); served != 200 {
		t.Fatalf("the page's key through the other instance: %d %s", served, body)
	}
	do(t, b, "revoke it", chromedp.Navigate(h.urls[0]+"/admin/?team=acme/ml"), chromedp.Click(`tr[data-key="page-key"] button`), chromedp.WaitVisible("#changed"))
	if state := text(t, b, `tr[data-key="page-key"]`); !strings.Contains(state, "revoked") {
		t.Fatalf("after revoking: %q", state)
	}
	if !testkit.WaitFor(5*time.Second, func() bool { return !knows() }) {
		t.Fatal("the other instance still knows the revoked key")
	}
	if served, _, body, _ := sendAs(http.DefaultClient, other, key, chatBody(4, false)); served != 401 {
		t.Fatalf("the revoked key through the other instance: %d %s", served, body)
	}
}

// Finance freezes a team from the page — confirmed, with a reason — over a
// permanent $300 the team had; requests are refused; then unfreezes it,
// and the $300 is back, not the configured $10. Both changes are on the
// org's page of changes and in the audit trail, with who and why.
func TestFreezeAndUnfreezeInChromium(t *testing.T) {
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`,
		topExtra: `admin_tokens: [{name: cfo, hash: "` + policy.HashKey("tg-cfo-page") + `", role: finance}]` + "\n" +
			"audit_path: " + filepath.Join(t.TempDir(), "audit.jsonl") + "\n",
	})
	if status, body := adminCall(t, "PUT", h.url+"/admin/v1/ceilings", "tg-cfo-page", `{"org":"acme","team":"ml","name":"usd-month","amount":"$300"}`); status != 200 {
		t.Fatalf("a permanent $300: %d %s", status, body)
	}
	if status, _, body, err := send(http.DefaultClient, h.url, chatBody(1, false)); err != nil || status != 200 {
		t.Fatalf("before the freeze: %d %s %v", status, body, err)
	}
	b := browser(t)
	row := `tr[data-budget="team:acme/ml:usd-month"]`
	do(t, b, "open the team", chromedp.Navigate(h.url+"/admin/?token=tg-cfo-page&team=acme/ml"), chromedp.WaitVisible(row+` button[value=freeze]`))
	do(t, b, "freeze", chromedp.SetValue(row+` input[name=reason]`, "audit of project X"), chromedp.Click(row+` button[value=freeze]`), chromedp.WaitVisible("#confirm-why"))
	do(t, b, "confirm", chromedp.Click(`#confirm button`), chromedp.WaitVisible(row+` button[value=unfreeze]`))
	if got := text(t, b, row+` .frozen`); got != "(frozen)" {
		t.Fatalf("the row says %q", got)
	}
	if in, _ := attrOf(t, b, row, "data-in-force"); in != "0" {
		t.Fatalf("in force while frozen: %s", in)
	}
	if status, _, body, err := send(http.DefaultClient, h.url, chatBody(2, false)); err != nil || !budgetRefused(status, body) {
		t.Fatalf("a request while frozen: %d %s %v", status, body, err)
	}
	do(t, b, "unfreeze", chromedp.SetValue(row+` input[name=reason]`, "audit done"), chromedp.Click(row+` button[value=unfreeze]`), chromedp.WaitVisible(row+` button[value=freeze]`))
	if in, _ := attrOf(t, b, row, "data-in-force"); in != "300000000" {
		t.Fatalf("in force after the unfreeze: %s, want the $300 from before the freeze", in)
	}
	if status, _, body, err := send(http.DefaultClient, h.url, chatBody(3, false)); err != nil || status != 200 {
		t.Fatalf("after the unfreeze: %d %s %v", status, body, err)
	}
	do(t, b, "the org's changes", chromedp.Click(`a.audit-link`), chromedp.WaitVisible(`#audit tr[data-action="unfreeze"]`))
	if got := text(t, b, `#audit tr[data-action="freeze"]`); !strings.Contains(got, "audit of project X") || !strings.Contains(got, "$300.00") {
		t.Fatalf("the freeze on the org's page: %q", got)
	}
	_, trail := adminCall(t, "GET", h.url+"/admin/v1/audit", "tg-cfo-page", "")
	for _, want := range []string{`"action":"freeze","target":"team:acme/ml:usd-month","old":300000000,"new":0`, `"reason":"audit of project X"`,
		`"action":"unfreeze","target":"team:acme/ml:usd-month","old":0,"new":300000000`, `"reason":"audit done"`} {
		if !strings.Contains(trail, want) {
			t.Fatalf("the audit trail lacks %s:\n%s", want, trail)
		}
	}
}

// Finance sets next month's ceiling from the page now: this month keeps
// its amount, the change is scheduled from the next month's start, with
// its reason in the history.
func TestNextMonthsCeilingFromThePageInChromium(t *testing.T) {
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`,
		topExtra: `admin_tokens: [{name: cfo, hash: "` + policy.HashKey("tg-cfo-page") + `", role: finance}]` + "\n" +
			"audit_path: " + filepath.Join(t.TempDir(), "audit.jsonl") + "\n",
	})
	b := browser(t)
	row := `tr[data-budget="team:acme/ml:usd-month"]`
	do(t, b, "open the team", chromedp.Navigate(h.url+"/admin/?token=tg-cfo-page&team=acme/ml"), chromedp.WaitVisible(row+` input[name=from]`))
	do(t, b, "next month $25", chromedp.SetValue(row+` input[name=amount]`, "$25"), chromedp.Click(row+` input[name=from]`),
		chromedp.Click(row+` button[value=set]`), chromedp.WaitVisible(`#history tr[data-action="schedule_ceiling"]`))
	if in, _ := attrOf(t, b, row, "data-in-force"); in != "10000000" {
		t.Fatalf("this month's ceiling after scheduling next month's: %s", in)
	}
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	_, body := adminCall(t, "GET", h.url+"/admin/v1/ceilings?org=acme&team=ml", "tg-cfo-page", "")
	if !strings.Contains(body, `"in_force":10000000`) || !strings.Contains(body, `"override_until":"`+next.Format(time.RFC3339)+`"`) {
		t.Fatalf("the budget: %s, want $10 until %s", body, next.Format(time.RFC3339))
	}
	_, trail := adminCall(t, "GET", h.url+"/admin/v1/audit", "tg-cfo-page", "")
	if !strings.Contains(trail, `"action":"schedule_ceiling","target":"team:acme/ml:usd-month","old":10000000,"new":25000000`) ||
		!strings.Contains(trail, `"from":"`+next.Format(time.RFC3339)+`"`) {
		t.Fatalf("the audit trail: %s", trail)
	}
}

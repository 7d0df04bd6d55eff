package e2e_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const (
	adminToken   = "tg-admin-token"
	financeToken = "tg-finance-token"
	viewerToken  = "tg-viewer-token" // sees acme/search only
	searchKey    = "tg-search-key"
)

func adminGateway(t *testing.T) (string, *app.App, *simulated.Server) {
	t.Helper()
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	dir := t.TempDir()
	src := `
ledger_path: ` + filepath.Join(dir, "ledger.jsonl") + `
audit_path: ` + filepath.Join(dir, "audit.jsonl") + `
admin_tokens:
  - {name: root, hash: "` + policy.HashKey(adminToken) + `", role: admin}
  - {name: cfo, hash: "` + policy.HashKey(financeToken) + `", role: finance}
  - {name: search-lead, hash: "` + policy.HashKey(viewerToken) + `", role: viewer, teams: [acme/search]}
upstreams: [{name: sim, base_url: "` + up.URL + `/v1", models: [test-model, gpt-4o-mini]}]
models:
  test-model:  {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
  gpt-4o-mini: {encoding: o200k_base, input: "$0.15", output: "$0.60", max_output_tokens: 1000, default_output_tokens: 100}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `", limits: [{name: key-usd-day, kind: budget, unit: usd, amount: "$2", period: day}]}]
      - id: search
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: s1, hash: "` + policy.HashKey(searchKey) + `"}]
`
	url, a := apptest.Serve(t, src, nil)
	return url, a, sim
}

func adminCall(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminRolesReportsAndCeilings(t *testing.T) {
	url, _, sim := adminGateway(t)
	for i, k := range []string{testKey, testKey, searchKey} {
		model := []string{"test-model", "gpt-4o-mini", "test-model"}[i]
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi `+strconv.Itoa(i)+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %v %v", i, err, resp.StatusCode)
		}
		resp.Body.Close()
	}
	month := time.Now().UTC().Format("2006-01")
	reports := url + "/admin/v1/reports?month=" + month

	// Roles.
	for _, tc := range []struct {
		desc, method, path, token, body string
		want                            int
	}{
		{"no token", "GET", reports, "", "", 401},
		{"wrong token", "GET", reports, "tg-nope", "", 401},
		{"a viewer asking for another team", "GET", reports + "&team=acme/ml", viewerToken, "", 404},
		{"a viewer asking for a team that does not exist", "GET", reports + "&team=acme/nope", viewerToken, "", 404},
		{"a viewer setting a ceiling", "PUT", url + "/admin/v1/ceilings", viewerToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$1"}`, 403},
		{"a viewer reading the audit", "GET", url + "/admin/v1/audit", viewerToken, "", 403},
		{"a viewer reading another team's ceilings", "GET", url + "/admin/v1/ceilings?org=acme&team=ml", viewerToken, "", 404},
		{"a viewer reading the org's ceilings", "GET", url + "/admin/v1/ceilings?org=acme", viewerToken, "", 404},
		{"a viewer reading its own team's ceilings", "GET", url + "/admin/v1/ceilings?org=acme&team=search", viewerToken, "", 200},
		{"a temporary ceiling that already lapsed", "PUT", url + "/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$1","until":"2020-01-01T00:00:00Z"}`, 400},
		{"a temporary ceiling with both until and for", "PUT", url + "/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$1","until":"2099-01-01T00:00:00Z","for":"1h"}`, 400},
		{"a temporary reset", "PUT", url + "/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"reset","for":"1h"}`, 400},
		{"a temporary ceiling for a negative duration", "PUT", url + "/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$1","for":"-1h"}`, 400},
		{"a viewer resetting a period", "POST", url + "/admin/v1/ceilings/reset", viewerToken, `{"org":"acme","team":"search","name":"usd-month"}`, 403},
		{"a reset without a budget name", "POST", url + "/admin/v1/ceilings/reset", financeToken, `{"org":"acme","team":"ml"}`, 400},
		{"a reset of a budget that does not exist", "POST", url + "/admin/v1/ceilings/reset", financeToken, `{"org":"acme","team":"ml","name":"nope"}`, 404},
		{"ceilings without an org", "GET", url + "/admin/v1/ceilings", financeToken, "", 400},
		{"ceilings of a team that does not exist", "GET", url + "/admin/v1/ceilings?org=acme&team=nope", financeToken, "", 404},
		{"finance reading any team", "GET", reports + "&team=acme/ml", financeToken, "", 200},
		{"a viewer reading another team's key", "GET", url + "/admin/v1/ceilings?org=acme&key=k1", viewerToken, "", 404},
		{"a viewer reading its own team's key", "GET", url + "/admin/v1/ceilings?org=acme&key=s1", viewerToken, "", 200},
		{"a key under the wrong team", "GET", url + "/admin/v1/ceilings?org=acme&team=search&key=k1", financeToken, "", 404},
		{"a key that does not exist", "GET", url + "/admin/v1/ceilings?org=acme&key=nope", financeToken, "", 404},
		{"a viewer setting a key's budget", "PUT", url + "/admin/v1/ceilings", viewerToken, `{"org":"acme","key":"s1","name":"key-usd-day","amount":"$1"}`, 403},
		{"a key budget that does not exist", "PUT", url + "/admin/v1/ceilings", financeToken, `{"org":"acme","key":"k1","name":"nope","amount":"$1"}`, 404},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if status, body := adminCall(t, tc.method, tc.path, tc.token, tc.body); status != tc.want {
				t.Fatalf("%d %s, want %d", status, body, tc.want)
			}
		})
	}

	// JSON and CSV agree with each other and with what the upstream reported.
	var rep struct {
		Rows []struct {
			Group     map[string]string
			Requests  int64
			USDMicros int64 `json:"usd_micros"`
		}
	}
	// Settlements land just after the answers: wait for the third entry.
	testkit.WaitFor(5*time.Second, func() bool {
		_, jsonBody := adminCall(t, "GET", reports+"&by=team,model", financeToken, "")
		if err := json.Unmarshal([]byte(jsonBody), &rep); err != nil {
			t.Fatalf("report %s (%v)", jsonBody, err)
		}
		return len(rep.Rows) == 3
	})
	if len(rep.Rows) != 3 {
		t.Fatalf("report rows %+v", rep.Rows)
	}
	_, csvBody := adminCall(t, "GET", reports+"&by=team,model&format=csv", financeToken, "")
	recs, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if err != nil || len(recs) != 4 || recs[0][0] != "team" || recs[0][6] != "usd_micros" {
		t.Fatalf("csv %q (%v)", csvBody, err)
	}
	var total int64
	for i, r := range rep.Rows {
		if recs[i+1][0] != r.Group["team"] || recs[i+1][1] != r.Group["model"] || recs[i+1][6] != strconv.FormatInt(r.USDMicros, 10) {
			t.Fatalf("row %d: json %+v, csv %v", i, r, recs[i+1])
		}
		total += r.USDMicros
	}
	u := sim.Stats().Usage
	tm, mini := u["test-model"], u["gpt-4o-mini"]
	want := tm.PromptTokens + 2*tm.CompletionTokens + (mini.PromptTokens*150_000+999_999)/1_000_000 + (mini.CompletionTokens*600_000+999_999)/1_000_000
	if total != want {
		t.Fatalf("report total %d µ$, the upstream reported usage worth %d", total, want)
	}
	// A viewer sees only its team.
	_, vBody := adminCall(t, "GET", reports, viewerToken, "")
	if !strings.Contains(vBody, `"team":"acme/search"`) || strings.Contains(vBody, `"team":"acme/ml"`) {
		t.Fatalf("viewer's report: %s", vBody)
	}

	// chat sends one request as k1 and returns its status.
	chat := func() int {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Finance freezes ml at $0.000001 — below its spend, so the API asks
	// first —: its next request is refused; the change is in the audit
	// trail with who, old and new.
	status, body := adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$0.000001"}`)
	if status != 409 || !strings.Contains(body, `"code":"confirmation_required"`) || chat() != 200 {
		t.Fatalf("an unconfirmed freeze: %d %s", status, body)
	}
	status, body = adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$0.000001","confirm":true}`)
	if status != 200 {
		t.Fatalf("set ceiling: %d %s", status, body)
	}
	if got := chat(); got != 400 {
		t.Fatalf("after the freeze: %d", got)
	}
	// The read side shows the override next to the configured amount, and
	// when the month ends.
	_, ceilBody := adminCall(t, "GET", url+"/admin/v1/ceilings?org=acme&team=ml", financeToken, "")
	var ceil struct {
		Budgets []struct {
			Configured int64     `json:"configured"`
			InForce    int64     `json:"in_force"`
			Overridden bool      `json:"overridden"`
			Remaining  int64     `json:"remaining"`
			ResetsAt   time.Time `json:"resets_at"`
			Zone       string    `json:"time_zone"`
		}
	}
	if err := json.Unmarshal([]byte(ceilBody), &ceil); err != nil || len(ceil.Budgets) != 1 {
		t.Fatalf("ceilings %s (%v)", ceilBody, err)
	}
	nowUTC := time.Now().UTC()
	nextMonth := time.Date(nowUTC.Year(), nowUTC.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if b := ceil.Budgets[0]; b.Configured != 10_000_000 || b.InForce != 1 || !b.Overridden || b.Remaining != 0 ||
		b.Zone != "UTC" || !b.ResetsAt.Equal(nextMonth) {
		t.Fatalf("ceilings after the freeze: %s (the month ends %s)", ceilBody, nextMonth)
	}
	// A temporary raise for an hour lets ml through again; the
	// audit trail says when it lapses.
	status, body = adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","team":"ml","name":"usd-month","amount":"$20","for":"1h"}`)
	var temp struct {
		New   int64     `json:"new"`
		Until time.Time `json:"until"`
	}
	if err := json.Unmarshal([]byte(body), &temp); status != 200 || err != nil || temp.New != 20_000_000 ||
		temp.Until.Before(time.Now().Add(59*time.Minute)) || temp.Until.After(time.Now().Add(time.Hour)) {
		t.Fatalf("temporary ceiling: %d %s", status, body)
	}
	if got := chat(); got != 200 {
		t.Fatalf("under the temporary raise: %d", got)
	}
	if _, ceilBody = adminCall(t, "GET", url+"/admin/v1/ceilings?org=acme&team=ml", financeToken, ""); !strings.Contains(ceilBody,
		`"in_force":20000000,"overridden":true,"override_until":"`+temp.Until.UTC().Format(time.RFC3339Nano)+`"`) {
		t.Fatalf("ceilings under the temporary raise: %s", ceilBody)
	}
	// A key's own budget: frozen, k1 is refused while its team has room;
	// its ceilings read under its team; back to the configured amount.
	// A bare number for a usd budget is refused, with the fix: "1" meant
	// a dollar to whoever typed it (or was "$21" with the shell's "$2"
	// eaten), 1 µ$ here.
	if status, body := adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","key":"k1","name":"key-usd-day","amount":"1"}`); status != 400 ||
		!strings.Contains(body, `\"$1\"`) || !strings.Contains(body, "µ$") {
		t.Fatalf("a bare number for a usd budget: %d %s", status, body)
	}
	if status, body := adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","key":"k1","name":"key-usd-day","amount":"1 µ$","confirm":true}`); status != 200 ||
		!strings.Contains(body, `"budget":"key:acme/k1:key-usd-day","unit":"usd_micros","old":2000000,"new":1`) {
		t.Fatalf("freezing a key's budget: %d %s", status, body)
	}
	if got := chat(); got != 400 {
		t.Fatalf("k1 under its frozen key budget: %d", got)
	}
	if _, body := adminCall(t, "GET", url+"/admin/v1/ceilings?org=acme&key=k1", financeToken, ""); !strings.Contains(body, `"team":"ml"`) ||
		!strings.Contains(body, `"key":"k1"`) || !strings.Contains(body, `"configured":2000000,"in_force":1,"overridden":true`) {
		t.Fatalf("a key's ceilings: %s", body)
	}
	if status, body := adminCall(t, "PUT", url+"/admin/v1/ceilings", financeToken, `{"org":"acme","key":"k1","name":"key-usd-day","amount":"reset"}`); status != 200 {
		t.Fatalf("restoring a key's budget: %d %s", status, body)
	}
	if got := chat(); got != 200 {
		t.Fatalf("k1 after its key budget was restored: %d", got)
	}
	// Starting ml's month over lets it spend a second ceiling's worth:
	// refused unconfirmed, or without a reason; then audited with the
	// spend it had and the reason.
	for _, req := range []string{`{"org":"acme","team":"ml","name":"usd-month"}`, `{"org":"acme","team":"ml","name":"usd-month","confirm":true}`,
		`{"org":"acme","team":"ml","name":"usd-month","reason":"billing mistake"}`} {
		if status, body := adminCall(t, "POST", url+"/admin/v1/ceilings/reset", financeToken, req); status != 409 || !strings.Contains(body, `"confirmation_required"`) {
			t.Fatalf("reset %s: %d %s", req, status, body)
		}
	}
	status, body = adminCall(t, "POST", url+"/admin/v1/ceilings/reset", financeToken, `{"org":"acme","team":"ml","name":"usd-month","confirm":true,"reason":"billing mistake"}`)
	var reset struct {
		Period      string `json:"period"`
		SpentBefore int64  `json:"spent_before"`
	}
	if err := json.Unmarshal([]byte(body), &reset); status != 200 || err != nil || reset.SpentBefore <= 0 || reset.Period != nowUTC.Format("2006-01") {
		t.Fatalf("reset: %d %s", status, body)
	}
	_, audit := adminCall(t, "GET", url+"/admin/v1/audit", adminToken, "")
	if !strings.Contains(audit, `"action":"reset_period","target":"team:acme/ml:usd-month:`+reset.Period+`","old":`+strconv.FormatInt(reset.SpentBefore, 10)+`,"new":0,"reason":"billing mistake"`) {
		t.Fatalf("the reset is not in the audit trail: %s", audit)
	}
	if !strings.Contains(audit, `"who":"cfo"`) || !strings.Contains(audit, `"old":10000000`) || !strings.Contains(audit, `"new":1`) ||
		!strings.Contains(audit, `"new":20000000,"until":"`+temp.Until.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("audit %s", audit)
	}
}

// chromium runs headless Chromium on url: the DOM after load, and a
// screenshot written to png.
func chromium(t *testing.T, url, png string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for this test (apt-get install chromium)")
	}
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	shot := exec.CommandContext(ctx, bin, append(flags, "--window-size=1000,1200", "--screenshot="+png, url)...)
	if out, err := shot.CombinedOutput(); err != nil {
		t.Fatalf("chromium screenshot: %v\n%s", err, out)
	}
	dom, err := exec.CommandContext(ctx, bin, append(flags, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(dom)
}

// The finance page, loaded by a real browser, shows the ledger's figures.
func TestFinancePageInChromium(t *testing.T) {
	url, _, _ := adminGateway(t)
	for i, k := range []string{testKey, testKey, searchKey} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"page `+strconv.Itoa(i)+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d", i)
		}
		resp.Body.Close()
	}
	month := time.Now().UTC().Format("2006-01")
	var rows []struct {
		Group     map[string]string
		USDMicros int64 `json:"usd_micros"`
		Requests  int64
	}
	testkit.WaitFor(5*time.Second, func() bool {
		_, body := adminCall(t, "GET", url+"/admin/v1/reports?month="+month+"&by=org,team", financeToken, "")
		var rep struct {
			Rows []struct {
				Group     map[string]string
				USDMicros int64 `json:"usd_micros"`
				Requests  int64
			}
		}
		_ = json.Unmarshal([]byte(body), &rep)
		rows = rep.Rows
		var n int64
		for _, r := range rows {
			n += r.Requests
		}
		return n == 3
	})
	png := filepath.Join(t.TempDir(), "finance.png")
	dom := chromium(t, url+"/admin/?token="+financeToken, png)
	if info, err := os.Stat(png); err != nil || info.Size() < 1000 {
		t.Fatalf("no screenshot: %v", err)
	}
	var total int64
	for _, r := range rows {
		team := r.Group["team"] // org/team
		want := `data-team="` + team + `" data-usd-micros="` + strconv.FormatInt(r.USDMicros, 10) + `"`
		if !strings.Contains(dom, want) {
			t.Fatalf("the page lacks %s:\n%s", want, dom)
		}
		total += r.USDMicros
	}
	if !strings.Contains(dom, `id="total" data-usd-micros="`+strconv.FormatInt(total, 10)+`"`) || total == 0 {
		t.Fatalf("the page's total is not the ledger's %d:\n%s", total, dom)
	}
	if !strings.Contains(dom, "<svg") || !strings.Contains(dom, "download CSV") {
		t.Fatal("no chart or CSV link")
	}
	// A viewer's page shows its team only.
	vdom := chromium(t, url+"/admin/?token="+viewerToken, filepath.Join(t.TempDir(), "viewer.png"))
	if !strings.Contains(vdom, `data-team="acme/search"`) || strings.Contains(vdom, `data-team="acme/ml"`) {
		t.Fatalf("viewer page:\n%s", vdom)
	}
}

// Wrong admin tokens lock the address out of the admin API and the gateway
// alike: the right token and the right API key are refused until
// Retry-After.
func TestAdminTokensAreLockedOut(t *testing.T) {
	url, _, _ := adminGateway(t)
	get := func(token string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, url+"/admin/v1/keys", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(adminToken); resp.StatusCode != 200 {
		t.Fatalf("the right token: %d", resp.StatusCode)
	}
	for i := range 30 { // auth_failures' default: 30 a minute
		if resp := get("wrong-" + strconv.Itoa(i)); resp.StatusCode != 401 {
			t.Fatalf("wrong token %d: %d", i, resp.StatusCode)
		}
	}
	resp := get(adminToken)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right token from a locked-out address: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// One count of failures: a wrong API key from the address is refused
	// too, while a valid one is served.
	for key, want := range map[string]int{"tg-guess": 429, testKey: 200} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Fatalf("API key %q from the address locked out by admin failures: %d, want %d", key, r.StatusCode, want)
		}
	}
}

package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
)

// A generic paid API: GET /geocode answers with its units in a header,
// POST /translate in its JSON body, /broken fails.
func paidAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "paid-secret" && r.Header.Get("Authorization") != "Bearer paid-secret" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/geocode":
			w.Header().Set("X-Units-Used", "3")
			fmt.Fprintf(w, `{"q":%q,"lat":1.5}`, r.URL.Query().Get("q"))
		case "/translate":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"text":%q,"usage":{"units":%d}}`, strings.ToUpper(string(body)), len(body))
		default:
			http.Error(w, `{"error":"broken"}`, http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func paidGateway(t *testing.T, api string, ceiling string) (string, *app.App) {
	t.Helper()
	src := `
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
paid_routes:
  - {name: geo, prefix: /paid/geo, base_url: "` + api + `", api_key: paid-secret, auth_header: X-Api-Key,
     per_request: "$0.001", per_unit: "$0.0005", units_header: X-Units-Used, units_limit: {query: limit}, max_units: 10,
     unbilled_statuses: [500]}
  - {name: tr, prefix: /paid/tr, base_url: "` + api + `", api_key: paid-secret,
     per_unit: "$0.0001", units_json: usage.units, units_limit: {body_bytes: true}, max_units: 100}
orgs: [{id: acme, teams: [{id: ml, limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + ceiling + `", period: month}],
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}, {id: ops, hash: "` + policy.HashKey(unlimitedKey) + `", unlimited: true}]}]}]
`
	return apptest.Serve(t, src, nil)
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	return callAs(t, testKey, method, url, body)
}

// callAs sends one request with key and returns its status and body.
func callAs(t *testing.T, key, method, url, body string) (int, string) {
	t.Helper()
	return adminCall(t, method, url, key, body)
}

func TestPaidRoutesPricedByRule(t *testing.T) {
	api := paidAPI(t)
	url, a := paidGateway(t, api.URL, "$1")
	if status, body := call(t, http.MethodGet, url+"/paid/geo/geocode?q=paris&limit=3", ""); status != 200 || !strings.Contains(body, `"q":"paris"`) {
		t.Fatalf("geocode: %d %s", status, body)
	}
	// $0.001 per request + 3 units × $0.0005 = 2500 µ$ (4000 reserved)
	if spent, pending := spentNow(t, a); spent != 2500 || pending != 0 {
		t.Fatalf("after geocode spent %d pending %d, want 2500", spent, pending)
	}
	if status, body := call(t, http.MethodPost, url+"/paid/tr/translate", "hello"); status != 200 || !strings.Contains(body, "HELLO") {
		t.Fatalf("translate: %d %s", status, body)
	}
	// 5 units (the body's length) × $0.0001 = 500 µ$
	if spent, _ := spentNow(t, a); spent != 3000 {
		t.Fatalf("after translate spent %d, want 3000", spent)
	}
	if status, _ := call(t, http.MethodGet, url+"/paid/geo/broken?limit=1", ""); status != 500 {
		t.Fatalf("broken: %d", status)
	}
	if spent, _ := spentNow(t, a); spent != 3000 {
		t.Fatalf("a status the route lists unbilled was charged: spent %d", spent)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/paid/geo/geocode?limit=1", nil)
	resp, err := http.DefaultClient.Do(req) // no key
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
}

func TestPaidRouteReservesWhatTheRequestAllows(t *testing.T) {
	api := paidAPI(t)
	url, a := paidGateway(t, api.URL, "$0.0055") // below a 10-unit geocode's maximum (6000 µ$)
	status, body := call(t, http.MethodGet, url+"/paid/geo/geocode?q=x&limit=10", "")
	if !budgetRefused(status, body) {
		t.Fatalf("a call whose maximum passes the ceiling: %d %s", status, body)
	}
	if spent, pending := spentNow(t, a); spent != 0 || pending != 0 {
		t.Fatalf("refused call left spent %d pending %d", spent, pending)
	}
}

// A paid route goes through the same admission as an LLM route: an
// unlimited key passes a ceiling that refuses everyone else, counted as a
// bypass and as the budget's shadow refusal.
func TestPaidRoutesShareTheLLMRoutesAdmission(t *testing.T) {
	api := paidAPI(t)
	url, a := paidGateway(t, api.URL, "$0.0055") // below one geocode's maximum (6000 µ$)
	if status, body := call(t, http.MethodGet, url+"/paid/geo/geocode?q=x&limit=10", ""); !budgetRefused(status, body) {
		t.Fatalf("an ordinary key past the ceiling: %d %s", status, body)
	}
	if status, body := callAs(t, unlimitedKey, http.MethodGet, url+"/paid/geo/geocode?q=x&limit=10", ""); status != 200 {
		t.Fatalf("an unlimited key on a paid route: %d %s", status, body)
	}
	// As on an LLM route, a limit the bypass passed is left as if it had
	// refused: the $0.0055 budget, which the call's maximum does not fit,
	// is not charged.
	if spent, pending := spentNow(t, a); spent != 0 || pending != 0 {
		t.Fatalf("a bypassed budget was charged: spent %d pending %d", spent, pending)
	}
	_, b := callAs(t, "", http.MethodGet, url+"/metrics", "")
	if !strings.Contains(b, `tollgate_bypasses_total{by="unlimited-key",team="ml"} 1`) {
		t.Fatalf("the bypass is not counted:\n%s", grepLines(b, "tollgate_bypasses_total"))
	}
	if !strings.Contains(b, `tollgate_shadow_refusals_total{limit="usd-month",scope="team",team="ml"} 1`) {
		t.Fatalf("the budget the bypass passed is not counted as a shadow refusal:\n%s", grepLines(b, "tollgate_shadow_refusals_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

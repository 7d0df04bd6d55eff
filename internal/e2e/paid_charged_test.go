package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
)

// Paid routes are bounded like LLM routes: the reservation is the most the
// request allows the API to bill (per request + per unit × the limit the
// request states), every answer the API bills is charged (a redirect too;
// only the statuses the route lists as unbilled are not), a call the API
// received is charged though its client left or the route timed out, and
// an API that bills past the limit is charged what it reported — an
// overrun, counted, logged and alerted. These tests run on the embedded
// store and on two instances sharing Redis, against a paid API that keeps
// the truth of what it billed.

// billingAPI is a paid API billing $0.001 a call and $0.0001 a unit
// (paidRigConfig's rule), keeping what it billed in µ$ and what each
// path was asked. /search?limit=N uses and reports N units; /lying
// reports (and bills) 20 × N; /fraction 2.5 units; /moved redirects
// (billed, reporting nothing); /broken fails with 500 (unbilled);
// /slow answers when release is closed; /hang never answers; /admin is
// an endpoint no route may reach.
type billingAPI struct {
	*httptest.Server
	billed  atomic.Int64 // µ$
	hits    sync.Map     // path → *atomic.Int64
	release chan struct{}
	arrived chan struct{} // one value a /slow or /hang call received
}

func newBillingAPI(t *testing.T) *billingAPI {
	t.Helper()
	api := &billingAPI{release: make(chan struct{}), arrived: make(chan struct{}, 16)}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(func() { close(api.release); api.Close() })
	return api
}

func (a *billingAPI) hit(path string) int64 {
	n, _ := a.hits.LoadOrStore(path, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

func (a *billingAPI) serve(w http.ResponseWriter, r *http.Request) {
	n, _ := a.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if r.Header.Get("X-Api-Key") != "paid-secret" {
		http.Error(w, "no key", http.StatusUnauthorized)
		return
	}
	limit, _ := strconv.ParseInt(r.URL.Query().Get("limit"), 10, 64)
	bill := func(units string, micros int64) {
		a.billed.Add(1000 + micros)
		if units != "" {
			w.Header().Set("X-Units-Used", units)
		}
	}
	switch r.URL.Path {
	case "/search":
		bill(strconv.FormatInt(limit, 10), 100*limit)
		fmt.Fprintf(w, `{"results":%d}`, limit)
	case "/lying":
		bill(strconv.FormatInt(20*limit, 10), 2000*limit)
		fmt.Fprint(w, `{"results":"many"}`)
	case "/fraction":
		bill("2.5", 250)
		fmt.Fprint(w, `{"results":2.5}`)
	case "/moved":
		bill("", 100*limit) // reports nothing: charged the most the request allowed
		http.Redirect(w, r, "/search?limit=1", http.StatusFound)
	case "/slow":
		a.arrived <- struct{}{}
		<-a.release
		bill(strconv.FormatInt(limit, 10), 100*limit)
		fmt.Fprint(w, `{"results":"late"}`)
	case "/hang":
		a.billed.Add(1000 + 100*limit) // received, so billed, but never answered in time
		a.arrived <- struct{}{}
		<-a.release
	case "/broken":
		http.Error(w, `{"error":"broken"}`, http.StatusInternalServerError)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// paidRig is a gateway (one instance on the embedded store, or two
// sharing Redis) with the route "api" under /paid/api to a billingAPI.
type paidRig struct {
	*storeRig
	api    *billingAPI
	mu     sync.Mutex // guards alerts
	alerts []Alert
}

func newPaidRig(t *testing.T, store, ceiling string) *paidRig {
	t.Helper()
	r := &paidRig{api: newBillingAPI(t)}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var a Alert
		_ = json.NewDecoder(req.Body).Decode(&a)
		r.mu.Lock()
		r.alerts = append(r.alerts, a)
		r.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	src := `
alerts: {webhooks: ["` + hook.URL + `"]}
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
paid_routes:
  - {name: api, prefix: /paid/api, base_url: "` + r.api.URL + `", api_key: paid-secret, auth_header: X-Api-Key, timeout: 1s,
     per_request: "$0.001", per_unit: "$0.0001", units_header: X-Units-Used, units_limit: {query: limit}, max_units: 10,
     unbilled_statuses: [500]}
orgs: [{id: acme, teams: [{id: ml, limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + ceiling + `", period: month}],
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]}]}]
`
	r.storeRig = serveOn(t, store, src)
	return r
}

// get sends GET target (under the gateway's root) to instance i.
func (r *paidRig) get(ctx context.Context, t *testing.T, i int, target string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.urls[i%len(r.urls)]+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := noRedirects.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// spent is the team's settled spend this month as instance 0 reads it.
func (r *paidRig) spent(t *testing.T) int64 {
	t.Helper()
	team := budget.Limit{Bucket: teamMonth, Partition: "acme", Name: "usd-month", Scope: budget.ScopeTeam,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: 1, Period: budget.Month}
	st, err := r.apps[0].Engine().Peek(context.Background(), []budget.Limit{team})
	if err != nil {
		t.Fatal(err)
	}
	return st[0].Spent
}

// Every answer the API bills is charged by the route's rule, with the
// units it reported (fractions rounded up), the most the request allowed
// when it reported none (a redirect), nothing for a status the route
// lists as unbilled — and the ledger equals what the API billed, within
// the rounding.
func TestPaidRouteChargesWhatTheAPIBills(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newPaidRig(t, store, "$1")
			ctx := context.Background()
			cases := []struct {
				target  string
				status  int
				charged int64
				units   int64
				how     string
			}{
				{"/paid/api/search?q=paris&limit=7", 200, 1700, 7, "reported"},
				{"/paid/api/fraction?limit=3", 200, 1300, 3, "reported"},       // 2.5 units billed, 3 charged
				{"/paid/api/moved?limit=4", 302, 1400, 4, "reservation"},       // a redirect is billed
				{"/paid/api/broken?limit=10", 500, 0, 10, ""},                  // unbilled by the route's rule
				{"/paid/api/search/?q=x&limit=2", 404, 1200, 2, "reservation"}, // any status is billed unless the route lists it
			}
			for i, c := range cases {
				status, body, err := r.get(ctx, t, i, c.target)
				if err != nil || status != c.status {
					t.Fatalf("%s: %d %s %v, want %d", c.target, status, body, err, c.status)
				}
			}
			entries := r.settled(t, len(cases))
			for _, c := range cases {
				found := false
				for _, e := range entries {
					if int64(e.Cost) == c.charged && e.Units == c.units && string(e.Settlement) == c.how {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no entry charging %d µ$ for %d units settled %q in %+v", c.target, c.charged, c.units, c.how, entries)
				}
			}
			// The API billed 1700 + 1250 + 1400 + 0 + 0; charged 1700 + 1300 + 1400 + 0 + 1200:
			// at least the bill, never more than the reservations.
			if got, billed := recorded(entries), r.api.billed.Load(); got < billed || got != 5600 {
				t.Errorf("recorded %d µ$, the API billed %d", got, billed)
			}
			if got := r.spent(t); got != 5600 {
				t.Errorf("the budget's spend %d µ$, want 5600", got)
			}
			// The key's own view includes the paid route's spend.
			_, b := callAs(t, testKey, http.MethodGet, r.urls[0]+"/v1/budget", "")
			if !strings.Contains(b, `"model":"api","paid_route":true`) || !strings.Contains(b, `"month_usd_micros":5600`) {
				t.Errorf("/v1/budget does not show the paid route's spend: %s", b)
			}
		})
	}
}

// What a request may cost is what it says it may use: no limit, a limit
// past max_units, a repeated or malformed limit, a path that could leave
// the route — each is refused with 400 naming what is wrong, before a
// byte reaches the API, and leaves no trace in the budget.
func TestPaidRouteRefusesWhatItCannotBound(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newPaidRig(t, store, "$1")
			ctx := context.Background()
			for _, c := range []struct{ target, says string }{
				{"/paid/api/search?q=x", "limit"},
				{"/paid/api/search?limit=11", "limit"},
				{"/paid/api/search?limit=1&limit=9", "limit"},
				{"/paid/api/search?limit=1&LIMIT=9", "limit"},
				{"/paid/api/search?limit=-1", "limit"},
				{"/paid/api/search?limit=1e3", "limit"},
				{"/paid/api/search?limit=%201", "limit"},
				{"/paid/api/../admin?limit=1", "path"},
				{"/paid/api/%2e%2e/admin?limit=1", "path"},
				{"/paid/api/%252e%252e/admin?limit=1", "path"},
				{"/paid/api/..;x/admin?limit=1", "path"},
				{"/paid/api//admin?limit=1", "path"},
				{"/paid/api/x%2fadmin?limit=1", "path"},
				{"/paid/api/x%5c..%5cadmin?limit=1", "path"},
				{"/paid/apiadmin?limit=1", ""},
			} {
				status, body, err := r.get(ctx, t, 0, c.target)
				if err != nil || status != 400 && status != 404 {
					t.Errorf("%s: %d %s %v, want a refusal", c.target, status, body, err)
					continue
				}
				if status == 400 && (!strings.Contains(body, `"invalid_request_error"`) || !strings.Contains(body, c.says)) {
					t.Errorf("%s: the refusal does not say what is wrong (%q): %s", c.target, c.says, body)
				}
			}
			if n := r.api.hit("/admin") + r.api.hit("/search"); n != 0 {
				t.Errorf("%d refused calls reached the API", n)
			}
			if got := r.spent(t); got != 0 {
				t.Errorf("refused calls left %d µ$ of spend", got)
			}
		})
	}
}

// A call the API received is charged though nobody waits for its answer:
// a client that leaves is charged what the API reports (drained); a call
// past the route's timeout is charged its reservation.
func TestAPaidCallTheGatewayStopsWaitingForIsCharged(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newPaidRig(t, store, "$1")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { _, _, err := r.get(ctx, t, 0, "/paid/api/slow?limit=6"); done <- err }()
			<-r.api.arrived
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the client did not leave: %v", err)
			}
			r.api.release <- struct{}{} // hand one waiting /slow its answer
			status, body, err := r.get(context.Background(), t, 1, "/paid/api/hang?limit=5")
			if err != nil || status != 504 {
				t.Fatalf("a call past the route's timeout: %d %s %v", status, body, err)
			}
			entries := r.settled(t, 2)
			want := map[string]budget.Entry{}
			for _, e := range entries {
				want[string(e.Settlement)+"/"+e.Abandoned] = e
			}
			// "drained" if the gateway noticed the client leave before the
			// answer came, "reported" if after: charged the same.
			e, ok := want["drained/"]
			if !ok {
				e, ok = want["reported/"]
			}
			if !ok || e.Cost != 1600 || e.Units != 6 {
				t.Errorf("the call whose client left: %+v", entries)
			}
			if e, ok := want["reservation/timeout"]; !ok || e.Cost != 1500 || e.Units != 5 {
				t.Errorf("the call past its timeout: %+v", entries)
			}
			if got, billed := recorded(entries), r.api.billed.Load(); got != billed {
				t.Errorf("recorded %d µ$, the API billed %d", got, billed)
			}
		})
	}
}

// An API that bills past what the request allowed is charged what it
// reported, though the budget passes its ceiling: the spend is real. The
// overrun is counted, logged, and alerted with the request's id, naming
// the budget it took past its ceiling.
func TestAPaidOverrunIsChargedAndAlerted(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newPaidRig(t, store, "$0.0045")
			status, body, err := r.get(context.Background(), t, 0, "/paid/api/lying?limit=1") // reserves 1100, bills 3000
			if err != nil || status != 200 {
				t.Fatalf("lying: %d %s %v", status, body, err)
			}
			status, body, err = r.get(context.Background(), t, 1, "/paid/api/lying?limit=2") // reserves 1200 (1500 left), bills 5000
			if err != nil || status != 200 {
				t.Fatalf("lying: %d %s %v", status, body, err)
			}
			entries := r.settled(t, 2)
			if got, billed := recorded(entries), r.api.billed.Load(); got != billed || got != 8000 {
				t.Fatalf("recorded %d µ$, the API billed %d, want 8000 (%+v)", got, billed, entries)
			}
			if got := r.spent(t); got != 8000 {
				t.Errorf("the budget's spend %d, want 8000: past its $0.0045 ceiling, as billed", got)
			}
			if status, body, _ := r.get(context.Background(), t, 0, "/paid/api/search?limit=1"); !budgetRefused(status, body) {
				t.Errorf("a budget past its ceiling admitted a call: %d %s", status, body)
			}
			metrics := ""
			for _, u := range r.urls {
				_, b := callAs(t, "", http.MethodGet, u+"/metrics", "")
				metrics += b
			}
			for _, want := range []string{
				`tollgate_overruns_total{model="api",team="ml"} `,
				`tollgate_overrun_usd_micros_total{model="api",team="ml"} `,
				`tollgate_budget_overruns_total{budget="usd-month",scope="team",team="ml"} 1`,
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("no %s in\n%s", want, grepLines(metrics, "overrun"))
				}
			}
			if n := sumMetric(metrics, "tollgate_overrun_usd_micros_total{"); n != 1900+3800 {
				t.Errorf("overrun µ$ %d, want 5700", n)
			}
			var got []Alert
			testkit.WaitFor(10*time.Second, func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				got = got[:0]
				for _, a := range r.alerts {
					if a.Kind == "overrun" {
						got = append(got, a)
					}
				}
				return len(got) == 2
			})
			ids := map[string]bool{}
			for _, e := range entries {
				ids[e.RequestID] = true
			}
			past := 0
			for _, a := range got {
				if !ids[a.RequestID] || a.Team != "ml" {
					t.Errorf("an overrun alert without its request's id: %+v", a)
				}
				if strings.Contains(a.Text, "past the ceiling") {
					past++
				}
			}
			if len(got) != 2 || past != 1 {
				t.Errorf("overrun alerts %+v, want 2, one naming the budget past its ceiling", got)
			}
		})
	}
}

// sumMetric adds the values of every line starting with prefix.
func sumMetric(metrics, prefix string) int64 {
	n := int64(0)
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int64(v)
		}
	}
	return n
}

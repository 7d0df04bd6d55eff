package gateway_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// aliases are the fixture's public names over two deployments: m at main
// ($1/$2 per 1M tokens) and m2 at backup (three times that).
const aliases = `aliases:
  smart: {strategy: weighted, deployments: [{upstream: main, model: m, weight: 3}, {upstream: backup, model: m2, weight: 1}]}
  busy:  {strategy: least_busy, deployments: [{upstream: main, model: m}, {upstream: backup, model: m2}]}
  chain: {strategy: ordered, deployments: [{upstream: main, model: m}, {upstream: backup, model: m2}]}`

func ask(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]}`
}

// A weighted alias spreads its requests by weight, each sent as its
// deployment's model and settled at that deployment's price.
func TestAliasWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`, top: aliases, intn: rng.IntN})
	byDeployment := map[string]int{}
	for range 1000 {
		o := f.chat(fullKey, ask("smart"))
		if o.err != nil {
			t.Fatal(o.err)
		}
		byDeployment[o.resp.Header().Get("X-Tollgate-Deployment")]++
	}
	t.Logf("served by %v", byDeployment)
	if n := byDeployment["main/m"]; n < 700 || n > 800 || n+byDeployment["backup/m2"] != 1000 {
		t.Fatalf("served by %v, want 750 ± 50 at main/m (weight 3 of 4)", byDeployment)
	}
	for _, r := range f.up.requests() {
		if want := map[string]string{"main.test": `"model":"m"`, "backup.test": `"model":"m2"`}[r.host]; !strings.Contains(r.body, want) {
			t.Fatalf("%s was sent %s", r.host, r.body)
		}
	}
	if spent, _ := f.spent(); spent != int64(byDeployment["main/m"]*20+byDeployment["backup/m2"]*60) {
		t.Fatalf("spent %d for %v: not each at its deployment's price", spent, byDeployment)
	}
	for _, e := range f.ledger() {
		if e.Model != "smart" || (e.Upstream == "backup") != (e.ServedModel == "m2") || e.Reserved != 3*208 {
			t.Fatalf("ledger entry %+v: want the alias, the model served, and the dearest deployment reserved", e)
		}
	}
}

// A deployment that fails before any byte reached the client hands the
// request to the next: served there, charged once, at its price.
func TestFailoverBeforeTheFirstByte(t *testing.T) {
	for _, tc := range []struct {
		desc string
		fail func(r *http.Request) (*http.Response, error)
		sent bool // the first attempt may have reached the upstream, unanswered
	}{
		{"a 500", func(r *http.Request) (*http.Response, error) {
			return jsonAnswer(r, 500, `{"error":{"message":"boom"}}`), nil
		}, false},
		{"a 429", func(r *http.Request) (*http.Response, error) {
			return jsonAnswer(r, 429, `{"error":{"message":"slow down"}}`), nil
		}, false},
		{"a 401: the gateway's key there is wrong", func(r *http.Request) (*http.Response, error) {
			return jsonAnswer(r, 401, `{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`), nil
		}, false},
		{"a refused connection", func(*http.Request) (*http.Response, error) { return nil, errRefusedConn }, false},
		{"no answer in time", func(*http.Request) (*http.Response, error) { return nil, errTimeout }, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, setup{teamLimits: teamBudget, top: aliases})
			f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
				if r.URL.Host == "main.test" {
					return tc.fail(r)
				}
				return jsonAnswer(r, 200, chatJSON(10, 5)), nil
			})
			o := f.chat(fullKey, ask("chain"))
			if o.err != nil || o.resp.Code != 200 || o.resp.Header().Get("X-Tollgate-Deployment") != "backup/m2" {
				t.Fatalf("%v %d %q", o.err, o.resp.Code, o.resp.Header().Get("X-Tollgate-Deployment"))
			}
			if got := f.up.requests(); len(got) != 2 || got[0].host != "main.test" || got[1].host != "backup.test" {
				t.Fatalf("upstream requests %+v", got)
			}
			e := f.ledger()
			spent, pending := f.spent()
			if !tc.sent {
				if spent != 60 || pending != 0 || len(e) != 1 || e[0].Upstream != "backup" || e[0].ServedModel != "m2" || e[0].Cost != 60 {
					t.Fatalf("spent %d pending %d, ledger %+v: want once, at backup's price (60)", spent, pending, e)
				}
				return
			}
			// The first attempt may have been billed: it is charged its
			// reservation, and the second was reserved anew.
			if len(e) != 2 || e[0].Upstream != "main" || e[0].Settlement != "reservation" || e[0].Abandoned != "connection" || e[0].Cost != e[0].Reserved ||
				e[1].Upstream != "backup" || e[1].Cost != 60 || e[1].Settlement != "reported" || e[0].ReservationID == e[1].ReservationID {
				t.Fatalf("ledger %+v", e)
			}
			if spent != int64(e[0].Reserved)+60 || pending != 0 {
				t.Fatalf("spent %d pending %d: want the first attempt's reservation (%v) and backup's 60", spent, pending, e[0].Reserved)
			}
		})
	}
}

// A failover after an attempt that may have been billed reserves the next
// attempt before sending it; when that does not fit, the client is
// refused, told why, and the first attempt stays charged.
func TestFailoverThatDoesNotFitIsRefused(t *testing.T) {
	// The budget holds one reservation (the request's dearest estimate,
	// 624 µ$), not two.
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}`, top: aliases})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		if r.URL.Host == "main.test" {
			return nil, errTimeout
		}
		return jsonAnswer(r, 200, chatJSON(10, 5)), nil
	})
	o := f.chat(fullKey, ask("chain"))
	var refused *gateway.Refused
	if !errors.As(o.err, &refused) || refused.After != "main" || o.call.Outcome() != "refused" {
		t.Fatalf("error %v, outcome %q; want a refusal after main", o.err, o.call.Outcome())
	}
	if got := f.up.requests(); len(got) != 1 {
		t.Fatalf("%d upstream requests; the second attempt must not be sent", len(got))
	}
	e := f.ledger()
	if spent, pending := f.spent(); len(e) != 1 || e[0].Abandoned != "connection" || spent != int64(e[0].Reserved) || pending != 0 {
		t.Fatalf("spent %d pending %d, ledger %+v: want the first attempt's reservation", spent, pending, e)
	}
}

// When every deployment fails, the last one's answer is relayed, and
// nothing is charged.
func TestTheLastFailureIsRelayed(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget, top: aliases})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		return jsonAnswer(r, 503, `{"error":{"message":"`+r.URL.Host+` is down"}}`), nil
	})
	o := f.chat(fullKey, ask("chain"))
	if o.err != nil || o.resp.Code != 503 || !strings.Contains(o.resp.Body.String(), "backup.test is down") {
		t.Fatalf("%v %d %s", o.err, o.resp.Code, o.resp.Body)
	}
	if spent, pending := f.spent(); spent != 0 || pending != 0 {
		t.Fatalf("spent %d pending %d", spent, pending)
	}
	// main's breaker is open now (one failure opens it here): the next
	// request goes to backup alone.
	o = f.chat(fullKey, ask("chain"))
	hosts := []string{}
	for _, r := range f.up.requests() {
		hosts = append(hosts, r.host)
	}
	if o.err != nil || o.resp.Code != 503 || strings.Join(hosts, " ") != "main.test backup.test backup.test" {
		t.Fatalf("with main's breaker open: %v %d, upstream requests to %v", o.err, o.resp.Code, hosts)
	}
}

// A least-busy alias sends a request to the upstream with the fewest in
// flight.
func TestLeastBusy(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget, top: aliases})
	f.up.arrived = make(chan string, 4)
	release := make(chan struct{})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		if strings.Contains(r.URL.Host, "main") {
			<-release
		}
		return jsonAnswer(r, 200, chatJSON(10, 5)), nil
	})
	held := make(chan outcome, 1)
	go func() { held <- f.chat(fullKey, ask("chain")) }() // ordered: main first, held there
	if host := <-f.up.arrived; host != "main.test" {
		t.Fatalf("the first went to %s", host)
	}
	for range 5 {
		o := f.do(context.Background(), bound.Chat, f.request(fullKey, "/v1/chat/completions", ask("busy")))
		if o.err != nil || o.resp.Header().Get("X-Tollgate-Deployment") != "backup/m2" {
			t.Fatalf("with main busy: %v, %q", o.err, o.resp.Header().Get("X-Tollgate-Deployment"))
		}
		<-f.up.arrived
	}
	close(release)
	if o := <-held; o.err != nil {
		t.Fatal(o.err)
	}
}

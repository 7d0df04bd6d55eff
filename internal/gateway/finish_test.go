package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/keyreg"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// downStore is a store that can be made unreachable: its reservations
// fail as a store that cannot be reached does.
type downStore struct {
	budget.Backend
	down atomic.Bool
}

func (s *downStore) Reserve(ctx context.Context, r *budget.Reservation) (budget.Result, error) {
	if s.down.Load() {
		return budget.Result{Decider: -1}, budget.ErrStoreUnavailable
	}
	return s.Backend.Reserve(ctx, r)
}

// While the store is away each route does as configured: fail closed
// (the default), fail open, or reserve from a local fallback bucket.
func TestARouteDegradesAsConfiguredWhileTheStoreIsAway(t *testing.T) {
	local, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var down *downStore
	f := newFixture(t, setup{teamLimits: teamBudget, fallback: budget.NewEngine(local, time.Minute),
		top:  `store: {kind: redis, redis: {addrs: ["127.0.0.1:1"], spool_path: /nonexistent/spool, on_unavailable_routes: {/v1/completions: fail_open, /v1/responses: local_fallback}}}`,
		wrap: func(s *memstore.Store) budget.Backend { down = &downStore{Backend: s}; return down }})
	down.down.Store(true)
	if o := f.chat(fullKey, hello); !errors.Is(o.err, budget.ErrStoreUnavailable) || o.call.Outcome() != "refused" {
		t.Fatalf("fail_closed: %v (%q)", o.err, o.call.Outcome())
	}
	o := f.do(context.Background(), bound.Completions, f.request(fullKey, "/v1/completions", `{"model":"m","prompt":"hello"}`))
	if o.err != nil || f.gw.Degraded("fail_open") != 1 {
		t.Fatalf("fail_open: %v, %d let through", o.err, f.gw.Degraded("fail_open"))
	}
	if e := f.ledger(); len(e) != 1 || e[0].Degraded != "fail_open" || !e[0].Served {
		t.Fatalf("fail_open ledger %+v", e)
	}
	o = f.do(context.Background(), bound.Responses, f.request(fullKey, "/v1/responses", `{"model":"m","input":"hello"}`))
	if o.err != nil || f.gw.Degraded("local_fallback") != 1 {
		t.Fatalf("local_fallback: %v, %d let through", o.err, f.gw.Degraded("local_fallback"))
	}
	if spent, _ := local.Spent("team:acme/ml:usd-month", budget.PeriodID(budget.Month, time.Now(), nil)); spent == 0 {
		t.Fatal("the local fallback bucket was not charged")
	}
	if got := counter(t, f.metrics.StoreUnavailable, "fail_closed", "/v1/chat/completions"); got != 1 {
		t.Fatalf("fail_closed counted %v", got)
	}
}

// gatedStore holds every settlement until its gate opens, and says when
// one has begun.
type gatedStore struct {
	budget.Backend
	began chan struct{}
	gate  chan struct{}
}

func (s *gatedStore) Settle(ctx context.Context, id string, actual budget.Amounts) (budget.Outcome, error) {
	s.began <- struct{}{}
	<-s.gate
	return s.Backend.Settle(ctx, id, actual)
}

// With settlement after the response, Finish returns while the store
// still settles; Drain waits for every settlement.
func TestSettlementAfterTheResponseAndDrain(t *testing.T) {
	gated := &gatedStore{began: make(chan struct{}, 8), gate: make(chan struct{})}
	f := newFixture(t, setup{teamLimits: teamBudget, async: true,
		wrap: func(s *memstore.Store) budget.Backend { gated.Backend = s; return gated }})
	for range 3 {
		if o := f.chat(fullKey, hello); o.err != nil {
			t.Fatal(o.err)
		}
	}
	for range 3 {
		<-gated.began // each settlement is under way, none done, every response written
	}
	if spent, pending := f.spent(); spent != 0 || pending != 3*208 {
		t.Fatalf("before the settlements: spent %d, pending %d", spent, pending)
	}
	close(gated.gate)
	f.gw.Drain()
	if spent, pending := f.spent(); spent != 3*20 || pending != 0 || len(f.ledger()) != 3 {
		t.Fatalf("after Drain: spent %d, pending %d, %d entries", spent, pending, len(f.ledger()))
	}
}

// Two gateways on one store push a budget past its thresholds: each
// threshold's alert is claimed once, whichever gateway sees it first.
func TestAnAlertFiresOnceAcrossGateways(t *testing.T) {
	hooks := make(chan gateway.Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a gateway.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		hooks <- a
	}))
	defer hook.Close()
	top := `alerts: {thresholds: [50], webhooks: ["` + hook.URL + `"]}`
	limits := `{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}`
	a := newFixture(t, setup{teamLimits: limits, top: top})
	b := newFixture(t, setup{teamLimits: limits, top: top, wrap: func(*memstore.Store) budget.Backend { return a.store }})
	for _, f := range []*fixture{a, b} {
		f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
			return jsonAnswer(r, 200, chatJSON(8, 100)), nil
		})
	}
	for i := range 4 { // 208 µ$ each: past 50 % at the third
		f := a
		if i%2 == 1 {
			f = b
		}
		if o := f.chat(fullKey, hello); o.err != nil {
			t.Fatalf("request %d: %v", i, o.err)
		}
	}
	sent := counter(t, a.metrics.Alerts, "team", "ml", "usd-month", "50") + counter(t, b.metrics.Alerts, "team", "ml", "usd-month", "50")
	if sent != 1 {
		t.Fatalf("the 50%% alert was claimed %v times", sent)
	}
	if got := <-hooks; got.Threshold != 50 || got.Team != "ml" || got.Budget != "usd-month" || got.Used < 500 {
		t.Fatalf("alert %+v", got)
	}
	// The finance page reads that it went out once this period.
	budgets, _ := policy.ScopeLimits(a.gw.Settings().Config(), "acme", "ml")
	l := budgets[0]
	for th, want := range map[int64]int64{50: 1, 80: 0} {
		id := policy.AlertID(l, budget.PeriodID(l.Period, a.clock.Now(), l.Location), th)
		if n, _, err := a.engine.Count(context.Background(), l.Partition, policy.AlertFired(id), 0, time.Hour); err != nil || n != want {
			t.Fatalf("threshold %d: fired %d times (%v), want %d", th, n, err, want)
		}
	}
}

// A reload applies from the next request on; one that changes what needs
// a restart is refused and the running settings stay.
func TestReload(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	before := f.gw.Settings()
	tight := *before.Config()
	tight.Orgs = slices.Clone(tight.Orgs)
	tight.Orgs[0].Teams = slices.Clone(tight.Orgs[0].Teams)
	tight.Orgs[0].Teams[0].Limits = []config.Limit{{Name: "usd-month", Kind: "budget", Unit: "usd", Amount: config.Money{Value: 100}, Period: "month"}}
	if err := f.gw.Reload(&tight); err != nil {
		t.Fatal(err)
	}
	if o := f.chat(fullKey, hello); !errors.Is(o.err, budget.ErrOverBudget) {
		t.Fatalf("after lowering the budget to 100 µ$: %v", o.err)
	}
	moved := tight
	moved.Listen = ":9999"
	if err := f.gw.Reload(&moved); err == nil {
		t.Fatal("a reload that moves the listener was applied")
	}
	if f.gw.Settings().Config().Listen == ":9999" {
		t.Fatal("the refused reload's settings are in force")
	}
}

// Run-time keys authenticate from the moment they are made, with their
// team's limits, and stop at once when revoked.
func TestRunTimeKeys(t *testing.T) {
	reg, err := keyreg.OpenFile(filepath.Join(t.TempDir(), "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, setup{teamLimits: teamBudget, keys: reg})
	plain, k, err := f.gw.CreateKey(context.Background(), policy.RuntimeKey{Org: "acme", Team: "ml", ID: "ci", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if o := f.chat(plain, hello); o.err != nil || o.call.Principal().Key != "ci" {
		t.Fatalf("the new key: %v", o.err)
	}
	if _, _, err := f.gw.CreateKey(context.Background(), policy.RuntimeKey{Org: "acme", Team: "ml", ID: "k1"}); !errors.Is(err, policy.ErrKeyExists) {
		t.Fatalf("a key with a config key's id: %v", err)
	}
	if _, _, err := f.gw.CreateKey(context.Background(), policy.RuntimeKey{Org: "acme", Team: "ml", ID: "x", Models: []string{"nope"}}); !errors.Is(err, policy.ErrBadKey) {
		t.Fatalf("a key for an unknown model: %v", err)
	}
	if views := f.gw.ListKeys("acme", "ml"); len(views) != 4 || views[3].ID != "ci" || views[3].Source != "admin" {
		t.Fatalf("keys listed %+v", views)
	}
	if _, now, err := f.gw.RevokeKey(context.Background(), "acme", k.ID, "test"); err != nil || !now {
		t.Fatalf("revoking: %v %v", now, err)
	}
	if _, ok := f.gw.Lookup(f.gw.Settings(), plain); ok {
		t.Fatal("a revoked key still authenticates")
	}
	if _, _, err := f.gw.RevokeKey(context.Background(), "acme", "k1", "test"); !errors.Is(err, policy.ErrConfigKey) {
		t.Fatalf("revoking a config key: %v", err)
	}
}

// An alert still being retried at shutdown: StopAlerts waits for it up to
// its grace, then ends it, and returns once no send is left; an alert
// whose webhook answers within the grace is delivered first. Before,
// retries slept on their own, untracked, and outlived the gateway.
func TestShutdownWaitsForAlertsThenEndsThem(t *testing.T) {
	for _, c := range []struct {
		name      string
		failFirst int // answers that fail before one succeeds (-1: all fail)
		grace     time.Duration
		delivered bool
	}{
		{"a webhook that answers on the second try is waited for", 1, 5 * time.Second, true},
		{"a webhook that never answers is given up on at the grace", -1, 200 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls, ok atomic.Int64
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				if c.failFirst < 0 || n <= int64(c.failFirst) {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				ok.Add(1)
			}))
			defer hook.Close()
			f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}`,
				top: `alerts: {thresholds: [50], webhooks: ["` + hook.URL + `"]}`})
			f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
				return jsonAnswer(r, 200, chatJSON(8, 100)), nil
			})
			for i := range 3 { // 208 µ$ each: past 50 % at the third, an alert
				if o := f.chat(fullKey, hello); o.err != nil {
					t.Fatalf("request %d: %v", i, o.err)
				}
			}
			f.gw.Drain()
			start := time.Now()
			f.gw.StopAlerts(c.grace)
			if took := time.Since(start); c.failFirst < 0 && took > c.grace+2*time.Second {
				t.Fatalf("StopAlerts took %v with a grace of %v", took, c.grace)
			}
			if got := ok.Load() == 1; got != c.delivered || calls.Load() == 0 {
				t.Fatalf("delivered %v after %d calls, want %v", got, calls.Load(), c.delivered)
			}
		})
	}
}

// A budget with room left, but less than a request needs at its smallest,
// refuses every such request though no threshold was reached: finance gets
// a "blocked" alert, once a period. Before, nothing fired.
func TestABlockedBudgetAlertsOnce(t *testing.T) {
	hooks := make(chan gateway.Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a gateway.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		hooks <- a
	}))
	defer hook.Close()
	// 4 requests of 208 µ$ leave 5 µ$: less than a request's input.
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "837 µ$", period: month}`,
		top: `alerts: {thresholds: [100], webhooks: ["` + hook.URL + `"]}`})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		return jsonAnswer(r, 200, chatJSON(8, 100)), nil
	})
	served, blocked := 0, 0
	for i := range 8 {
		o := f.chat(fullKey, hello)
		switch {
		case o.err == nil:
			served++
		case errors.Is(o.err, budget.ErrOverBudget):
			blocked++
		default:
			t.Fatalf("request %d: %v", i, o.err)
		}
	}
	f.gw.Drain()
	f.gw.StopAlerts(5 * time.Second)
	close(hooks)
	var got []gateway.Alert
	for a := range hooks {
		got = append(got, a)
	}
	if served == 0 || blocked < 2 {
		t.Fatalf("%d served, %d refused for want of room: the budget was never blocked twice", served, blocked)
	}
	if len(got) != 1 || got[0].Kind != "blocked" || got[0].Team != "ml" || got[0].Budget != "usd-month" || got[0].Limit != 837 ||
		!strings.Contains(got[0].Text, "is blocked") {
		t.Fatalf("alerts %+v, want one blocked alert", got)
	}
	t.Logf("%d served, %d refused; the alert: %s", served, blocked, got[0].Text)
}

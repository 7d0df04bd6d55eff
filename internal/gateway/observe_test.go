package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/policy"
)

// Finance cuts a budget below what is spent: the request it then refuses
// sets the utilisation gauge past 1, and the 100 % alert it fires names
// the spend as it is, not the ceiling.
func TestSpendPastTheCeilingIsObservedAsItIs(t *testing.T) {
	hooks := make(chan gateway.Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a gateway.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		hooks <- a
	}))
	defer hook.Close()
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}`,
		top: `alerts: {thresholds: [50, 100], webhooks: ["` + hook.URL + `"]}`})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		return jsonAnswer(r, 200, chatJSON(8, 100)), nil
	})
	for i := range 4 { // 208 µ$ each
		if o := f.chat(fullKey, hello); o.err != nil {
			t.Fatalf("request %d: %v", i, o.err)
		}
	}
	if spent, pending := f.spent(); spent != 832 || pending != 0 {
		t.Fatalf("spent %d pending %d, want 832 and 0", spent, pending)
	}
	gauge := func() float64 {
		return testutil.ToFloat64(f.metrics.BudgetUsed.WithLabelValues("team", "ml", "usd-month"))
	}
	if g := gauge(); g >= 1 {
		t.Fatalf("gauge %v under the ceiling", g)
	}

	budgets, _ := policy.ScopeLimits(f.gw.Settings().Config(), "acme", "ml")
	if err := f.engine.SetCeiling(context.Background(), budgets[0], 400, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if o := f.chat(fullKey, hello); !errors.Is(o.err, budget.ErrExhausted) {
		t.Fatalf("under a ceiling below the spend: %v", o.err)
	}
	if g := gauge(); g != 832.0/400 {
		t.Fatalf("gauge %v after the refusal, want 832/400 = %v", g, 832.0/400)
	}
	for deadline := time.After(10 * time.Second); ; {
		select {
		case a := <-hooks:
			if a.Threshold != 100 {
				continue
			}
			if a.Used != 832 || a.Limit != 400 || a.Basis != "settled" {
				t.Fatalf("the 100 %% alert says %d of %d (%s), want 832 of 400 settled: %q", a.Used, a.Limit, a.Basis, a.Text)
			}
			return
		case <-deadline:
			t.Fatal("no 100 % alert")
		}
	}
}

// An upstream bills more than was reserved, and the spend passes the
// ceiling in one request: once it settles the gauge says so, and the
// 100 % alert fires with the spend as it is — no later request needed.
func TestAnOverbilledSettlementIsObservedAtOnce(t *testing.T) {
	hooks := make(chan gateway.Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a gateway.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		hooks <- a
	}))
	defer hook.Close()
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}`,
		top: `alerts: {thresholds: [100], webhooks: ["` + hook.URL + `"]}`})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		return jsonAnswer(r, 200, chatJSON(8, 1000)), nil // 1000 output tokens where 100 were reserved
	})
	o := f.chat(fullKey, hello)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if e := f.ledger(); len(e) != 1 || e[0].Cost != 2008 || e[0].Reserved >= 1000 {
		t.Fatalf("ledger %+v, want one entry of 2008 µ$ reserved under 1000", e)
	}
	if spent, pending := f.spent(); spent != 2008 || pending != 0 {
		t.Fatalf("spent %d pending %d, want 2008 and 0", spent, pending)
	}
	if g := testutil.ToFloat64(f.metrics.BudgetUsed.WithLabelValues("team", "ml", "usd-month")); g != 2008.0/1000 {
		t.Fatalf("gauge %v once settled, want 2008/1000 = %v", g, 2008.0/1000)
	}
	// Two alerts, in either order: the 100 % threshold, and the overrun
	// (the settlement charged past its reservation).
	kinds := map[string]gateway.Alert{}
	for range 2 {
		select {
		case a := <-hooks:
			kinds[a.Kind] = a
		case <-time.After(10 * time.Second):
			t.Fatalf("alerts %+v, want a threshold and an overrun", kinds)
		}
	}
	if a := kinds["threshold"]; a.Threshold != 100 || a.Used != 2008 || a.Limit != 1000 || a.Basis != "settled" {
		t.Fatalf("the alert says %d %% at %d of %d (%s), want 100 %% at 2008 of 1000 settled: %q", a.Threshold, a.Used, a.Limit, a.Basis, a.Text)
	}
	if a := kinds["overrun"]; a.Used != 2008 || !strings.Contains(a.Text, "past the ceiling") {
		t.Fatalf("the overrun alert: %+v", a)
	}
}

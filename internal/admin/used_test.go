package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/policy"
)

// A settlement that costs more than its reservation takes a budget past
// its ceiling: the team page's "used", GET /admin/v1/ceilings and the 409
// of a cut name the settled spend as it is, not the ceiling.
func TestBudgetsShowSpendPastTheCeiling(t *testing.T) {
	p := newFinancePage(t)
	limits, _ := policy.ScopeLimits(p.cfg, "acme", "ml")
	var month budget.Limit
	for _, l := range limits {
		if l.Name == "usd-month" {
			month = l
		}
	}
	ctx := context.Background()
	r, _, err := p.engine.Reserve(ctx, []budget.Limit{month}, budget.Amounts{Requests: 1, Cost: 700 * budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.engine.Settle(ctx, r, budget.Amounts{Requests: 1, Cost: 900 * budget.Dollar}); err != nil {
		t.Fatal(err)
	}

	page := p.do(http.MethodGet, "/admin/?team=acme/ml", "tg-cfo", false, nil).Body.String()
	if got := attr(t, page, `data-used`); got != "900000000" {
		t.Fatalf("the page's used is %s µ$, want the 900000000 spent (ceiling $800)", got)
	}
	if !strings.Contains(page, ">$900.00</td>") {
		t.Fatal("the page does not show $900.00 used")
	}

	var api struct{ Budgets []admin.CeilingView }
	if rec := p.do(http.MethodGet, "/admin/v1/ceilings?org=acme&team=ml", "tg-cfo", false, nil); rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &api) != nil || len(api.Budgets) != 1 {
		t.Fatalf("GET /admin/v1/ceilings: %d %s", rec.Code, rec.Body)
	}
	if b := api.Budgets[0]; b.InForce != int64(800*budget.Dollar) || b.Used != int64(900*budget.Dollar) || b.Remaining != 0 {
		t.Fatalf("GET /admin/v1/ceilings: %+v; want 900000000 used of 800000000, none left", b)
	}

	req := httptest.NewRequest(http.MethodPut, "/admin/v1/ceilings", strings.NewReader(`{"org":"acme","team":"ml","name":"usd-month","amount":"$100"}`))
	req.Header.Set("Authorization", "Bearer tg-cfo")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	p.e.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != http.StatusConflict || !strings.Contains(body, `"used":900000000`) || !strings.Contains(body, "below the $900.00 already spent or reserved") {
		t.Fatalf("a cut below the spend: %d %s", rec.Code, body)
	}
}

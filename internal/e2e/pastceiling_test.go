package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Spend past a budget's ceiling is shown as it is wherever it is read:
// the utilisation gauge, GET /v1/budget's used and remaining, GET
// /admin/v1/ceilings, the exhausted refusal's message. It gets there two
// ways: an upstream bills more than the gateway reserved (it ignores
// max_tokens: one request takes a $0.01 budget to about $0.02), or finance
// cuts the ceiling to half of what the month has spent. On the embedded
// store, and on Redis with two instances, exact and leased: the request
// that overspends is served by the first instance, the rest read on the
// last.
func TestSpendPastTheCeilingIsShownAsItIs(t *testing.T) {
	const ceilingUSD = 10_000 // µ$: $0.01
	for _, mode := range []struct {
		name, redisExtra string
		redis            bool
	}{
		{name: "embedded"},
		{name: "redis exact", redis: true, redisExtra: "    exact: true\n"},
		{name: "redis leased", redis: true},
	} {
		for _, cause := range []struct {
			name string
			sim  simulated.Options
			// overspend takes the budget past its ceiling and returns
			// the month's spend and the ceiling then in force.
			overspend func(t *testing.T, h *harness) (spent, ceiling int64)
		}{
			{"the upstream bills more than was reserved",
				simulated.Options{Fault: simulated.IgnoreMaxTokens, ReplyTokens: func(uint64) int64 { return 10_000 }},
				func(t *testing.T, h *harness) (int64, int64) {
					body := chatBody(0, false) // max_tokens 10: some 30 µ$ reserved
					if status, _, body, err := send(http.DefaultClient, h.url, body); err != nil || status != 200 {
						t.Fatalf("the overbilled request: %d %v %s", status, err, body)
					}
					spent := settled(t, h)
					if spent <= ceilingUSD {
						t.Fatalf("the upstream billed %d µ$, not past the %d µ$ ceiling", spent, ceilingUSD)
					}
					// The instance that served it shows the spend once
					// settled, before any other request reads the budget.
					want := float64(spent) / ceilingUSD
					var g float64
					testkit.WaitFor(5*time.Second, func() bool { g = budgetGauge(t, h.url); return g == want })
					if g != want {
						t.Fatalf("tollgate_budget_utilization_ratio = %v once settled, want %v", g, want)
					}
					return spent, ceilingUSD
				}},
			{"finance cuts the ceiling below the spend", simulated.Options{},
				func(t *testing.T, h *harness) (int64, int64) {
					for i := range 4 {
						if status, _, body, err := send(http.DefaultClient, h.url, chatBody(i, i%2 == 0)); err != nil || status != 200 {
							t.Fatalf("request %d: %d %v %s", i, status, err, body)
						}
					}
					spent := settled(t, h)
					if spent == 0 || spent > ceilingUSD {
						t.Fatalf("spent %d µ$ under a %d µ$ ceiling", spent, ceilingUSD)
					}
					ceiling := spent / 2
					if status, body := adminCall(t, http.MethodPut, h.urls[len(h.urls)-1]+"/admin/v1/ceilings", financeToken,
						fmt.Sprintf(`{"org":"acme","team":"ml","name":"usd-month","amount":"%d µ$","confirm":true}`, ceiling)); status != 200 {
						t.Fatalf("cutting the ceiling: %d %s", status, body)
					}
					return spent, ceiling
				}},
		} {
			t.Run(mode.name+"/"+cause.name, func(t *testing.T) {
				su := setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.01", period: month}`, sim: cause.sim,
					topExtra: "admin_tokens: [{name: cfo, hash: \"" + policy.HashKey(financeToken) + "\", role: finance}]\n"}
				if mode.redis {
					su.redisAddr, su.instances, su.spoolDir, su.redisExtra = redistest.Start(t).Addr, 2, t.TempDir(), mode.redisExtra
				}
				h := startWith(t, su)
				spent, ceiling := cause.overspend(t, h)
				last := h.urls[len(h.urls)-1]

				// The key holder reads the spend as it is: leased
				// slices given back, nothing in flight holds any of it.
				var b ownBudgetLimit
				testkit.WaitFor(5*time.Second, func() bool {
					b = ownMonthBudget(t, last)
					return b.Used == spent
				})
				if b.Limit != ceiling || b.Used != spent || b.Remaining != 0 || b.UsedUSD != budget.Money(spent).Micros() || b.RemainingUSD != budget.Money(0).Micros() {
					t.Fatalf("GET /v1/budget: %+v; want %d used of %d, none left", b, spent, ceiling)
				}
				// And so does finance.
				status, body := adminCall(t, http.MethodGet, last+"/admin/v1/ceilings?org=acme&team=ml", financeToken, "")
				var c struct {
					Budgets []struct {
						InForce         int64 `json:"in_force"`
						Used, Remaining int64
					}
				}
				if err := json.Unmarshal([]byte(body), &c); status != 200 || err != nil || len(c.Budgets) != 1 {
					t.Fatalf("GET /admin/v1/ceilings: %d %v %s", status, err, body)
				}
				if got := c.Budgets[0]; got.InForce != ceiling || got.Used != spent || got.Remaining != 0 {
					t.Fatalf("GET /admin/v1/ceilings: %s; want %d used of %d, none left", body, spent, ceiling)
				}

				// Refused as exhausted, saying what is spent.
				status, _, body, err := send(http.DefaultClient, last, chatBody(9, false))
				if err != nil || status != 400 || !strings.Contains(body, `"code":"insufficient_quota"`) {
					t.Fatalf("past the ceiling: %d %v %s", status, err, body)
				}
				says := budget.Money(spent).Dollars() + " of " + budget.Money(ceiling).Dollars() + " is spent"
				if !strings.Contains(body, says) {
					t.Fatalf("the refusal does not say %q: %s", says, body)
				}

				// The instance that refused has set its gauge past 1.
				if g, want := budgetGauge(t, last), float64(spent)/float64(ceiling); g != want {
					t.Fatalf("tollgate_budget_utilization_ratio = %v after the refusal, want %v", g, want)
				}
			})
		}
	}
}

// settled is the team's month spend once it is settled, in the store the
// harness runs on, checked against what the upstream reported.
func settled(t *testing.T, h *harness) int64 {
	t.Helper()
	var spent int64
	if h.rdb != nil {
		spent, _, _ = h.settledAsReported("test-model")
	} else {
		spent, _ = h.spent(teamMonth)
	}
	if reported := h.reportedCost("test-model"); spent != reported {
		t.Fatalf("spent %d µ$, the upstream reported %d", spent, reported)
	}
	return spent
}

// budgetGauge is the team month budget's utilisation as the gateway at
// base exports it.
func budgetGauge(t *testing.T, base string) float64 {
	t.Helper()
	return value(t, scrapeURL(t, base), "tollgate_budget_utilization_ratio", map[string]string{"scope": "team", "team": "ml", "budget": "usd-month"})
}

// ownBudgetLimit is one limit as GET /v1/budget shows it.
type ownBudgetLimit struct {
	Name                   string
	Limit, Used, Remaining int64
	UsedUSD                string `json:"used_usd"`
	RemainingUSD           string `json:"remaining_usd"`
}

// ownMonthBudget reads the test key's usd-month budget from GET /v1/budget
// at the gateway at base.
func ownMonthBudget(t *testing.T, base string) ownBudgetLimit {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/budget", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Limits []ownBudgetLimit }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/budget: %d %v", resp.StatusCode, err)
	}
	for _, l := range got.Limits {
		if l.Name == "usd-month" {
			return l
		}
	}
	t.Fatalf("GET /v1/budget has no usd-month: %+v", got.Limits)
	return ownBudgetLimit{}
}

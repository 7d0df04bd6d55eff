package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// TestLimitHeaders: every enforced limit in the IETF pair, the deciding one
// and the tightest dollar budget in the X- headers by name — a shadow
// limit and a meter nowhere, even when one of them decided.
func TestLimitHeaders(t *testing.T) {
	limits := []budget.Limit{
		{Name: "usd-month", Scope: budget.ScopeOrg, Kind: budget.Ceiling, Unit: budget.Microdollars, Period: budget.Month},
		{Name: "trial", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Requests, Window: time.Minute, Shadow: true},
		{Name: "usd-day", Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Period: budget.Day},
		{Name: "spend", Scope: budget.ScopeTeam, Kind: budget.Meter, Unit: budget.Microdollars, Period: budget.Month},
		{Name: "rpm", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Requests, Window: time.Minute},
	}
	status := []budget.Status{
		{Capacity: 100_000_000, Remaining: 90_000_000, ResetAfter: 40 * time.Hour},
		{Capacity: 5, Remaining: 0, ResetAfter: 30 * time.Second},
		{Capacity: 10_000_000, Remaining: 2_500_000, ResetAfter: 3 * time.Hour},
		{},
		{Capacity: 60, Remaining: 59, ResetAfter: time.Second},
	}
	for _, tc := range []struct {
		decider              int
		limit, remain, reset string
		policy               string
	}{
		{decider: 4, limit: "60", remain: "59", reset: "1", policy: "key-rpm"},
		{decider: 2, limit: "10000000", remain: "2500000", reset: "10800", policy: "team-usd-day"},
		{decider: 1, limit: "5", remain: "0", reset: "30", policy: "key-trial"}, // shadow: not in the IETF pair
	} {
		h := http.Header{}
		writeLimitHeaders(h, limits, budget.Result{Allowed: true, Decider: tc.decider, Status: status})
		want := map[string]string{
			"Ratelimit-Policy":  `"org-usd-month";q=100000000;qu="usd_micros";w=2678400, "team-usd-day";q=10000000;qu="usd_micros";w=86400, "key-rpm";q=60;qu="requests";w=60`,
			"Ratelimit":         `"org-usd-month";r=90000000;t=144000, "team-usd-day";r=2500000;t=10800, "key-rpm";r=59;t=1`,
			"X-Ratelimit-Limit": tc.limit, "X-Ratelimit-Remaining": tc.remain, "X-Ratelimit-Reset": tc.reset,
			"X-Ratelimit-Policy":              tc.policy,
			"X-Tollgate-Budget-Policy":        "team-usd-day",
			"X-Tollgate-Budget-Limit-Usd":     "10.000000",
			"X-Tollgate-Budget-Remaining-Usd": "2.500000",
			"X-Tollgate-Budget-Reset":         "10800",
		}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("decider %d: %s = %q, want %q", tc.decider, k, got, v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("decider %d: %d headers, want %d: %v", tc.decider, len(h), len(want), h)
		}
	}
}

// TestLimitHeadersPartial: without a deciding limit, or without a dollar
// budget, the headers there are have their own values.
func TestLimitHeadersPartial(t *testing.T) {
	usd := budget.Limit{Name: "usd-day", Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Period: budget.Day}
	rpm := budget.Limit{Name: "rpm", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Requests, Window: time.Minute}
	h := http.Header{}
	writeLimitHeaders(h, []budget.Limit{usd}, budget.Result{Decider: -1, Status: []budget.Status{{Capacity: 3_000_000, Remaining: 1_250_000, ResetAfter: time.Hour}}})
	for k, v := range map[string]string{"X-Tollgate-Budget-Policy": "team-usd-day", "X-Tollgate-Budget-Limit-Usd": "3.000000",
		"X-Tollgate-Budget-Remaining-Usd": "1.250000", "X-Tollgate-Budget-Reset": "3600", "X-Ratelimit-Limit": ""} {
		if got := h.Get(k); got != v {
			t.Errorf("no decider: %s = %q, want %q", k, got, v)
		}
	}
	h = http.Header{}
	writeLimitHeaders(h, []budget.Limit{rpm}, budget.Result{Decider: 0, Status: []budget.Status{{Capacity: 60, Remaining: 7, ResetAfter: 9 * time.Second}}})
	for k, v := range map[string]string{"X-Ratelimit-Limit": "60", "X-Ratelimit-Remaining": "7", "X-Ratelimit-Reset": "9",
		"X-Ratelimit-Policy": "key-rpm", "Ratelimit": `"key-rpm";r=7;t=9`, "X-Tollgate-Budget-Policy": ""} {
		if got := h.Get(k); got != v {
			t.Errorf("no budget: %s = %q, want %q", k, got, v)
		}
	}
	// Two allocations, whatever the number of limits: the values' one
	// string and the slices' one array.
	limits := []budget.Limit{usd, rpm, usd, rpm}
	res := budget.Result{Decider: 1, Status: []budget.Status{{Capacity: 5}, {Capacity: 6}, {Capacity: 7}, {Capacity: 8}}}
	h = make(http.Header, 16)
	if n := testing.AllocsPerRun(100, func() { clear(h); writeLimitHeaders(h, limits, res) }); n != 2 {
		t.Errorf("%v allocations for the limit headers, want 2", n)
	}
}

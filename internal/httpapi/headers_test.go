package httpapi

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
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
		writeLimitHeaders(h, limits, budget.Result{Allowed: true, Decider: tc.decider, Status: status}, true)
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
		// By default an allowed response carries the IETF pair alone; a
		// refusal carries the X- headers too, by default or not.
		lean := http.Header{}
		writeLimitHeaders(lean, limits, budget.Result{Allowed: true, Decider: tc.decider, Status: status}, false)
		if len(lean) != 2 || lean.Get("Ratelimit") != want["Ratelimit"] || lean.Get("Ratelimit-Policy") != want["Ratelimit-Policy"] {
			t.Errorf("decider %d, allowed, without duplicates: %v", tc.decider, lean)
		}
		refused := http.Header{}
		writeLimitHeaders(refused, limits, budget.Result{Decider: tc.decider, Status: status}, false)
		if !maps.EqualFunc(refused, h, slices.Equal) {
			t.Errorf("decider %d, refused: %v, want %v", tc.decider, refused, h)
		}
	}
}

// TestLimitHeadersPartial: without a deciding limit, or without a dollar
// budget, the headers there are have their own values.
func TestLimitHeadersPartial(t *testing.T) {
	usd := budget.Limit{Name: "usd-day", Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Period: budget.Day}
	rpm := budget.Limit{Name: "rpm", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Requests, Window: time.Minute}
	h := http.Header{}
	writeLimitHeaders(h, []budget.Limit{usd}, budget.Result{Decider: -1, Status: []budget.Status{{Capacity: 3_000_000, Remaining: 1_250_000, ResetAfter: time.Hour}}}, false)
	for k, v := range map[string]string{"X-Tollgate-Budget-Policy": "team-usd-day", "X-Tollgate-Budget-Limit-Usd": "3.000000",
		"X-Tollgate-Budget-Remaining-Usd": "1.250000", "X-Tollgate-Budget-Reset": "3600", "X-Ratelimit-Limit": ""} {
		if got := h.Get(k); got != v {
			t.Errorf("no decider: %s = %q, want %q", k, got, v)
		}
	}
	h = http.Header{}
	writeLimitHeaders(h, []budget.Limit{rpm}, budget.Result{Decider: 0, Status: []budget.Status{{Capacity: 60, Remaining: 7, ResetAfter: 9 * time.Second}}}, false)
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
	if n := testing.AllocsPerRun(100, func() { clear(h); writeLimitHeaders(h, limits, res, true) }); n != 2 {
		t.Errorf("%v allocations for the limit headers, want 2", n)
	}
}

// TestPolicyCacheNeverStale: from many goroutines, limit sets far more
// than the cache's slots, some of them topped up between requests, each
// response's RateLimit-Policy and limit names are those its own limits
// make afresh. It fails when an entry is used without comparing every
// limit (a slot shared by two sets, a capacity changed).
func TestPolicyCacheNeverStale(t *testing.T) {
	type set struct {
		limits []budget.Limit
		status []budget.Status
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sets := make([]set, 300)
	for i := range sets {
		n := 1 + rng.IntN(5)
		for j := range n {
			l := budget.Limit{Name: fmt.Sprintf("l%d", rng.IntN(4)), Scope: budget.Scope(1 + rng.IntN(3)), Kind: budget.Rate, Unit: budget.Requests, Window: time.Duration(1+rng.IntN(3)) * time.Minute}
			switch rng.IntN(4) {
			case 0:
				l.Kind, l.Unit, l.Period = budget.Ceiling, budget.Microdollars, budget.Day
			case 1:
				l.Shadow = true
			}
			sets[i].limits = append(sets[i].limits, l)
			sets[i].status = append(sets[i].status, budget.Status{Capacity: int64(1 + rng.IntN(3)), Remaining: int64(j)})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 5000 {
				s := sets[rng.IntN(len(sets))]
				status := slices.Clone(s.status)
				if rng.IntN(8) == 0 {
					status[0].Capacity += int64(rng.IntN(2)) // a top-up, or not
				}
				d := rng.IntN(len(s.limits))
				h := http.Header{}
				writeLimitHeaders(h, s.limits, budget.Result{Decider: d, Status: status}, true)
				fresh := newPolicy(s.limits, status)
				if got := h.Get("Ratelimit-Policy"); got != fresh.value {
					errs <- fmt.Sprintf("%v %v: policy %q, made afresh %q", s.limits, status, got, fresh.value)
					return
				}
				if got, want := h.Get("X-Ratelimit-Policy"), policyName(&s.limits[d]); got != want {
					errs <- fmt.Sprintf("%v: decider named %q, want %q", s.limits, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// writeLimitHeaders tells the client where it stands, on allowed and refused
// responses alike:
//
//   - RateLimit-Policy and RateLimit (IETF httpapi draft): one item per
//     limit, named "<scope>-<name>", with quota q, unit qu, window w,
//     remaining r and seconds to reset t;
//   - X-RateLimit-Limit/Remaining/Reset for the deciding limit (reset in
//     seconds from now);
//   - X-Tollgate-Budget-* for the tightest dollar budget, in dollars.
func writeLimitHeaders(h http.Header, limits []budget.Limit, res budget.Result) {
	if len(limits) == 0 || len(res.Status) != len(limits) {
		return
	}
	var policy, state strings.Builder
	tightest := -1
	for i := range limits {
		l, s := &limits[i], res.Status[i]
		name := l.Scope.String() + "-" + l.Name
		if i > 0 {
			policy.WriteString(", ")
			state.WriteString(", ")
		}
		fmt.Fprintf(&policy, "%q;q=%d;qu=%q", name, l.Capacity(), unitName(l))
		if w := window(l); w > 0 {
			fmt.Fprintf(&policy, ";w=%d", w)
		}
		fmt.Fprintf(&state, "%q;r=%d;t=%d", name, s.Remaining, seconds(s.ResetAfter))
		if l.Kind == budget.Ceiling && l.Unit == budget.Microdollars &&
			(tightest < 0 || s.Remaining < res.Status[tightest].Remaining) {
			tightest = i
		}
	}
	h.Set("RateLimit-Policy", policy.String())
	h.Set("RateLimit", state.String())
	if d := res.Decider; d >= 0 && d < len(limits) {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(limits[d].Capacity(), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(res.Status[d].Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(res.Status[d].ResetAfter), 10))
		h.Set("X-RateLimit-Policy", limits[d].Scope.String()+"-"+limits[d].Name)
	}
	if tightest >= 0 {
		l, s := &limits[tightest], res.Status[tightest]
		h.Set("X-Tollgate-Budget-Policy", l.Scope.String()+"-"+l.Name)
		h.Set("X-Tollgate-Budget-Limit-Usd", dollars(l.Amount))
		h.Set("X-Tollgate-Budget-Remaining-Usd", dollars(s.Remaining))
		h.Set("X-Tollgate-Budget-Reset", strconv.FormatInt(seconds(s.ResetAfter), 10))
	}
}

func unitName(l *budget.Limit) string {
	if l.Kind == budget.Concurrency {
		return "concurrent-requests"
	}
	return l.Unit.String()
}

// window is a limit's time window in seconds: a rate's refill window, or a
// budget's calendar span (a month counted as 31 days).
func window(l *budget.Limit) int64 {
	switch l.Kind {
	case budget.Rate:
		return seconds(l.Window)
	case budget.Ceiling:
		if l.Period == budget.Day {
			return 86400
		}
		return 31 * 86400
	}
	return 0
}

func seconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

func dollars(micros int64) string {
	return strings.TrimPrefix(budget.Money(micros).String(), "$")
}

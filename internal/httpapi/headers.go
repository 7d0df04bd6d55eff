package httpapi

import (
	"math"
	"net/http"
	"strconv"
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
	// Built by appending: these headers go out on every response, and fmt
	// made them a measurable part of the gateway's CPU per request.
	policy := make([]byte, 0, 64*len(limits))
	state := make([]byte, 0, 48*len(limits))
	tightest := -1
	// names[i] is where limit i's name is in policy, quotes excluded: the
	// X- headers that name a limit take it from there, not from a string
	// of their own.
	var names [16][2]int
	for i := range limits {
		l, s := &limits[i], res.Status[i]
		if l.Shadow || l.Kind == budget.Meter {
			continue // not enforced: nothing for the client to pace by
		}
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		from := len(policy) + 1
		policy = appendName(policy, l)
		if i < len(names) {
			names[i] = [2]int{from, len(policy) - 1}
		}
		policy = append(policy, ";q="...)
		policy = strconv.AppendInt(policy, s.Capacity, 10)
		policy = append(policy, `;qu="`...)
		policy = append(policy, unitName(l)...)
		policy = append(policy, '"')
		if w := window(l); w > 0 {
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, w, 10)
		}
		state = appendName(state, l)
		state = append(state, ";r="...)
		state = strconv.AppendInt(state, s.Remaining, 10)
		state = append(state, ";t="...)
		state = strconv.AppendInt(state, seconds(s.ResetAfter), 10)
		if l.Kind == budget.Ceiling && l.Unit == budget.Microdollars &&
			(tightest < 0 || s.Remaining < res.Status[tightest].Remaining) {
			tightest = i
		}
	}
	// The keys are written in canonical form, which saves Set re-canonicalising
	// them; the values share one backing array (one allocation, not ten).
	vals := make([]string, 0, 10)
	set := func(key, v string) {
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	ps := string(policy)
	set("Ratelimit-Policy", ps)
	set("Ratelimit", string(state))
	name := func(i int) string {
		if i < len(names) && names[i][1] > 0 {
			return ps[names[i][0]:names[i][1]]
		}
		return policyName(&limits[i]) // not enforced, or past the sixteenth
	}
	if d := res.Decider; d >= 0 && d < len(limits) {
		set("X-Ratelimit-Limit", strconv.FormatInt(res.Status[d].Capacity, 10))
		set("X-Ratelimit-Remaining", strconv.FormatInt(res.Status[d].Remaining, 10))
		set("X-Ratelimit-Reset", strconv.FormatInt(seconds(res.Status[d].ResetAfter), 10))
		set("X-Ratelimit-Policy", name(d))
	}
	if tightest >= 0 {
		s := res.Status[tightest]
		set("X-Tollgate-Budget-Policy", name(tightest))
		set("X-Tollgate-Budget-Limit-Usd", dollars(s.Capacity))
		set("X-Tollgate-Budget-Remaining-Usd", dollars(s.Remaining))
		set("X-Tollgate-Budget-Reset", strconv.FormatInt(seconds(s.ResetAfter), 10))
	}
}

// policyName is how clients see a limit: "<scope>-<name>".
func policyName(l *budget.Limit) string { return l.Scope.String() + "-" + l.Name }

// appendName appends a limit's policy name, quoted. Names are config ids
// ([A-Za-z0-9._-]), so they need no escaping.
func appendName(b []byte, l *budget.Limit) []byte {
	b = append(b, '"')
	b = append(b, l.Scope.String()...)
	b = append(b, '-')
	b = append(b, l.Name...)
	return append(b, '"')
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

func dollars(micros int64) string { return budget.Money(micros).Micros() }

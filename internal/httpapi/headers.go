package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/httpx"
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
	// Every value is appended to one buffer, made one string, and sliced:
	// these headers go out on every response, and a string and a slice
	// per header (fmt before that) were a measurable part of the
	// gateway's CPU per request. cut[i] ends value i in the buffer.
	var stack [1024]byte
	b := stack[:0]
	var cut [12]int
	n := 0
	end := func() { cut[n], n = len(b), n+1 }
	tightest := -1
	// names[i] is where limit i's name is in the policy, quotes
	// excluded: the X- headers that name a limit take it from there.
	var names [16][2]int
	for i := range limits {
		l, s := &limits[i], res.Status[i]
		if l.Shadow || l.Kind == budget.Meter {
			continue // not enforced: nothing for the client to pace by
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		from := len(b) + 1
		b = appendName(b, l)
		if i < len(names) {
			names[i] = [2]int{from, len(b) - 1}
		}
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, s.Capacity, 10)
		b = append(b, `;qu="`...)
		b = append(b, unitName(l)...)
		b = append(b, '"')
		if w := window(l); w > 0 {
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, w, 10)
		}
		if l.Kind == budget.Ceiling && l.Unit == budget.Microdollars &&
			(tightest < 0 || s.Remaining < res.Status[tightest].Remaining) {
			tightest = i
		}
	}
	end() // RateLimit-Policy
	first := true
	for i := range limits {
		l, s := &limits[i], res.Status[i]
		if l.Shadow || l.Kind == budget.Meter {
			continue
		}
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = appendName(b, l)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, s.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds(s.ResetAfter), 10)
	}
	end() // RateLimit
	d := res.Decider
	decider := d >= 0 && d < len(limits)
	if decider {
		b = strconv.AppendInt(b, res.Status[d].Capacity, 10)
		end()
		b = strconv.AppendInt(b, res.Status[d].Remaining, 10)
		end()
		b = strconv.AppendInt(b, seconds(res.Status[d].ResetAfter), 10)
		end()
	}
	if tightest >= 0 {
		s := res.Status[tightest]
		b = budget.Money(s.Capacity).AppendMicros(b)
		end()
		b = budget.Money(s.Remaining).AppendMicros(b)
		end()
		b = strconv.AppendInt(b, seconds(s.ResetAfter), 10)
		end()
	}
	all := string(b)
	value := func(i int) string {
		if i == 0 {
			return all[:cut[0]]
		}
		return all[cut[i-1]:cut[i]]
	}
	name := func(i int) string {
		if i < len(names) && names[i][1] > 0 {
			return all[names[i][0]:names[i][1]]
		}
		return policyName(&limits[i]) // not enforced, or past the sixteenth
	}
	// The keys are written in canonical form, which saves Set
	// re-canonicalising them.
	hs := httpx.NewHeaders(h, 10)
	hs.Set("Ratelimit-Policy", value(0))
	hs.Set("Ratelimit", value(1))
	v := 2
	if decider {
		hs.Set("X-Ratelimit-Limit", value(v))
		hs.Set("X-Ratelimit-Remaining", value(v+1))
		hs.Set("X-Ratelimit-Reset", value(v+2))
		hs.Set("X-Ratelimit-Policy", name(d))
		v += 3
	}
	if tightest >= 0 {
		hs.Set("X-Tollgate-Budget-Policy", name(tightest))
		hs.Set("X-Tollgate-Budget-Limit-Usd", value(v))
		hs.Set("X-Tollgate-Budget-Remaining-Usd", value(v+1))
		hs.Set("X-Tollgate-Budget-Reset", value(v+2))
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

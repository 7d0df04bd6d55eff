package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
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
//
// The X- headers duplicate what the IETF pair says: they go out on
// refusals, and on allowed responses only where duplicates is set
// (server.limit_headers: all).
func writeLimitHeaders(h http.Header, limits []budget.Limit, res budget.Result, duplicates bool) {
	if len(limits) == 0 || len(res.Status) != len(limits) {
		return
	}
	pol := policies.get(limits, res.Status)
	// Every other value is appended to one buffer, made one string, and
	// sliced: these headers go out on every response, and a string and a
	// slice per header (fmt before that) were a measurable part of the
	// gateway's CPU per request. cut[i] ends value i in the buffer.
	var stack [512]byte
	b := stack[:0]
	var cut [7]int
	n := 0
	end := func() { cut[n], n = len(b), n+1 }
	// The X- duplicates: on every refusal, on an allowed response where
	// asked for.
	dups := duplicates || !res.Allowed
	tightest := -1
	for i := range limits {
		l, s := &limits[i], res.Status[i]
		if !l.Enforced() {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '"')
		b = append(b, pol.names[i]...)
		b = append(b, `";r=`...)
		b = strconv.AppendInt(b, s.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds(s.ResetAfter), 10)
		if dups && l.Kind == budget.Ceiling && l.Unit == budget.Microdollars &&
			(tightest < 0 || s.Remaining < res.Status[tightest].Remaining) {
			tightest = i
		}
	}
	end() // RateLimit
	d := res.Decider
	decider := dups && d >= 0 && d < len(limits)
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
	// The keys are written in canonical form, which saves Set
	// re-canonicalising them.
	room := 2 // the values set below, in one allocation
	if decider {
		room += 4
	}
	if tightest >= 0 {
		room += 4
	}
	hs := httpx.NewHeaders(h, room)
	hs.Set("Ratelimit-Policy", pol.value)
	hs.Set("Ratelimit", value(0))
	v := 1
	if decider {
		hs.Set("X-Ratelimit-Limit", value(v))
		hs.Set("X-Ratelimit-Remaining", value(v+1))
		hs.Set("X-Ratelimit-Reset", value(v+2))
		hs.Set("X-Ratelimit-Policy", pol.names[d])
		v += 3
	}
	if tightest >= 0 {
		hs.Set("X-Tollgate-Budget-Policy", pol.names[tightest])
		hs.Set("X-Tollgate-Budget-Limit-Usd", value(v))
		hs.Set("X-Tollgate-Budget-Remaining-Usd", value(v+1))
		hs.Set("X-Tollgate-Budget-Reset", value(v+2))
	}
}

// policies are the RateLimit-Policy values of the limit sets seen lately.
// A set's policy (names, quotas, units, windows) changes only with the
// configuration, or a ceiling's capacity with a top-up; formatting it at
// every response cost more than finding it here.
var policies policyCache

// policyCache holds policies in a fixed number of slots, each replaced by
// the last set that hashed to it. An entry is used only where it was made
// of the same limits, compared field by field: a hash collision costs a
// formatting, never a wrong header.
type policyCache struct {
	slots [64]atomic.Pointer[limitPolicy]
}

// limitPolicy is one limit set's RateLimit-Policy value; names[i] is limit i's
// name ("<scope>-<name>") for the X- headers; items what it was made of.
type limitPolicy struct {
	value string
	names []string
	items []policyItem
}

// policyItem is what a limit's item in RateLimit-Policy is made of, as
// the limit and its status have it: compared as they are, not as the
// item formats them.
type policyItem struct {
	name   string
	scope  budget.Scope
	kind   budget.Kind
	unit   budget.Unit
	period budget.Period
	window time.Duration
	quota  int64
	shadow bool
}

func itemOf(l *budget.Limit, s budget.Status) policyItem {
	return policyItem{name: l.Name, scope: l.Scope, kind: l.Kind, unit: l.Unit, period: l.Period, window: l.Window, quota: s.Capacity, shadow: l.Shadow}
}

// get returns the policy of limits, in force as status says.
func (c *policyCache) get(limits []budget.Limit, status []budget.Status) *limitPolicy {
	h := uint64(len(limits))
	for i := range limits {
		h = h*0x9E3779B97F4A7C15 + uint64(status[i].Capacity) + uint64(len(limits[i].Name))<<32
	}
	slot := &c.slots[h>>58]
	if p := slot.Load(); p != nil && p.matches(limits, status) {
		return p
	}
	p := newPolicy(limits, status)
	slot.Store(p)
	return p
}

func (p *limitPolicy) matches(limits []budget.Limit, status []budget.Status) bool {
	if len(p.items) != len(limits) {
		return false
	}
	for i := range limits {
		if p.items[i] != itemOf(&limits[i], status[i]) {
			return false
		}
	}
	return true
}

func newPolicy(limits []budget.Limit, status []budget.Status) *limitPolicy {
	p := &limitPolicy{names: make([]string, len(limits)), items: make([]policyItem, len(limits))}
	var b []byte
	at := make([][2]int, len(limits))
	for i := range limits {
		l := &limits[i]
		p.items[i] = itemOf(l, status[i])
		if !l.Enforced() {
			p.names[i] = policyName(l) // not advertised: named for a refusal it decided
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		from := len(b) + 1
		b = appendName(b, l)
		at[i] = [2]int{from, len(b) - 1}
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, status[i].Capacity, 10)
		b = append(b, `;qu="`...)
		b = append(b, unitName(l)...)
		b = append(b, '"')
		if w := window(l); w > 0 {
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, w, 10)
		}
	}
	p.value = string(b)
	for i := range limits {
		if limits[i].Enforced() {
			p.names[i] = p.value[at[i][0]:at[i][1]]
		}
	}
	return p
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

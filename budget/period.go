package budget

import (
	"sync/atomic"
	"time"
)

// PeriodID returns the calendar id of the period that contains t in loc:
// "2026-11" for a month, "2026-11-29" for a day. Budgets are keyed by it, so
// a new period starts from zero at local midnight, not at a rolling offset.
func PeriodID(p Period, t time.Time, loc *time.Location) string {
	t = t.In(locOrUTC(loc))
	y, m, d := t.Date()
	if y < 0 || y > 9999 {
		if p == Day {
			return t.Format("2006-01-02")
		}
		return t.Format("2006-01")
	}
	// Written digit by digit: every request keys each of its budgets by
	// its period, and time.Format costs some 5,000 instructions a call.
	b := [10]byte{byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + m/10), byte('0' + m%10), '-', byte('0' + d/10), byte('0' + d%10)}
	id, last := b[:], &lastPeriodIDs[0]
	if p != Day {
		id, last = b[:7], &lastPeriodIDs[1]
	}
	// The id made last is handed out again: a request keys each of its
	// budgets by its period, the same string for a day or a month.
	if l := last.Load(); l != nil && *l == string(id) {
		return *l
	}
	s := string(id)
	last.Store(&s)
	return s
}

// lastPeriodIDs are the last day's and month's ids PeriodID made.
var lastPeriodIDs [2]atomic.Pointer[string]

// PeriodEnd returns the first instant after the period containing t.
func PeriodEnd(p Period, t time.Time, loc *time.Location) time.Time {
	t = t.In(locOrUTC(loc))
	y, m, d := t.Date()
	if p == Day {
		return time.Date(y, m, d+1, 0, 0, 0, 0, t.Location())
	}
	return time.Date(y, m+1, 1, 0, 0, 0, 0, t.Location())
}

func locOrUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}

// PeriodStart returns the first instant of the period containing t.
func PeriodStart(p Period, t time.Time, loc *time.Location) time.Time {
	t = t.In(locOrUTC(loc))
	y, m, d := t.Date()
	if p == Day {
		return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	}
	return time.Date(y, m, 1, 0, 0, 0, 0, t.Location())
}

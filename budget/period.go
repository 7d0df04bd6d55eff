package budget

import "time"

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
	if p == Day {
		return string(b[:])
	}
	return string(b[:7])
}

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

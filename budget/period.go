package budget

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// PeriodID returns the calendar id of the period that contains t in loc:
// "2026-11" for a month, "2026-11-29" for a day. Budgets are keyed by it, so
// a new period starts from zero at local midnight, not at a rolling offset.
func PeriodID(p Period, t time.Time, loc *time.Location) string {
	return spanOf(p, t, loc).id
}

// PeriodEnd returns the first instant after the period containing t.
func PeriodEnd(p Period, t time.Time, loc *time.Location) time.Time {
	return spanOf(p, t, loc).end
}

// PeriodStart returns the first instant of the period containing t.
func PeriodStart(p Period, t time.Time, loc *time.Location) time.Time {
	return spanOf(p, t, loc).start
}

// A span is one calendar period in one location: its id and its bounds.
type span struct {
	p          Period
	loc        *time.Location
	start, end time.Time
	id         string
	// from and to bound the seconds (unix) the span is handed out for:
	// start's and end's — periods start on a whole second — unless
	// time.Date normalised one of them (a midnight a DST change skips) to
	// an instant of another period's date.
	from, to int64
}

// spans are the spans made last, a few (period, location) pairs. Every
// request keys each of its budgets by its period and tells the client
// when each resets: the same span many times a second, which a
// comparison of t against its bounds finds (t.Date and time.Date cost
// some 300 instructions a call; time.Format some 5,000).
var spans [8]atomic.Pointer[span]

func spanOf(p Period, t time.Time, loc *time.Location) *span {
	loc = locOrUTC(loc)
	slot := &spans[(uintptr(unsafe.Pointer(loc))>>4^uintptr(p))%uintptr(len(spans))]
	if s := slot.Load(); s != nil && s.p == p && s.loc == loc && s.from <= t.Unix() && t.Unix() < s.to {
		return s
	}
	s := newSpan(p, t, loc)
	slot.Store(s)
	return s
}

func newSpan(p Period, t time.Time, loc *time.Location) *span {
	y, m, d := t.In(loc).Date()
	s := &span{p: p, loc: loc, id: periodID(p, y, m, d)}
	if p == Day {
		s.start, s.end = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	} else {
		s.start, s.end = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	s.from, s.to = s.start.Unix(), s.end.Unix()
	if y, m, d := s.start.In(loc).Date(); s.start.After(t) || periodID(p, y, m, d) != s.id {
		s.from = t.Unix() + 1 // from the next second on
	}
	if y, m, d := s.end.Add(-1).In(loc).Date(); !s.end.After(t) || periodID(p, y, m, d) != s.id {
		s.to = s.from // never again
	}
	return s
}

// periodID is the id of the period of day (y, m, d), written digit by
// digit where the year has four.
func periodID(p Period, y int, m time.Month, d int) string {
	if y < 0 || y > 9999 {
		if p == Day {
			return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
		}
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Format("2006-01")
	}
	b := [10]byte{byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + m/10), byte('0' + m%10), '-', byte('0' + d/10), byte('0' + d%10)}
	if p == Day {
		return string(b[:])
	}
	return string(b[:7])
}

func locOrUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}

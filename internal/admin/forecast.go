package admin

import (
	"encoding/json"
	"math/big"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// Forecast is a month's spend run on to its end at the rate so far.
// Integers throughout, so that anyone can redo it by hand from the
// figures the page shows.
type Forecast struct {
	Spent   int64 // µ$ spent from the month's start to Now
	Ceiling int64 // µ$ in force, if HasCeiling (0 is a frozen budget's)
	// HasCeiling says the team has a monthly dollar budget.
	HasCeiling bool
	Elapsed    int64 // seconds of the month gone
	Length     int64 // seconds in the month
	// Projected is Spent × Length / Elapsed (rounded down): the month's
	// spend if the burn rate so far goes on.
	Projected int64
	// MetAt is when spend reaches the ceiling at that rate — start +
	// Elapsed × Ceiling / Spent seconds (rounded up) — if that is before
	// the month ends; Reached if it already has.
	MetAt   *time.Time
	Reached bool
	Now     time.Time
}

// PerDay is the burn rate in µ$ a day.
func (f Forecast) PerDay() int64 {
	if f.Elapsed == 0 {
		return 0
	}
	return mulDiv(f.Spent, 86400, f.Elapsed, false)
}

// forecast runs spent (from start to now) on to end, against ceiling
// (negative: none; 0, a frozen budget, is one).
func forecast(spent, ceiling int64, start, end, now time.Time) Forecast {
	f := Forecast{Spent: spent, Ceiling: max(ceiling, 0), HasCeiling: ceiling >= 0, Elapsed: int64(now.Sub(start) / time.Second), Length: int64(end.Sub(start) / time.Second), Now: now}
	if f.Elapsed <= 0 {
		return f
	}
	f.Projected = mulDiv(spent, f.Length, f.Elapsed, false)
	switch {
	case ceiling < 0: // none
	case spent >= ceiling && (spent > 0 || ceiling == 0): // a frozen budget is reached
		f.Reached = true
	case spent <= 0:
	default:
		at := start.Add(time.Duration(mulDiv(f.Elapsed, ceiling, spent, true)) * time.Second)
		if at.Before(end) {
			f.MetAt = &at
		}
	}
	return f
}

// mulDiv is a × b / c without overflow, rounded down or up.
func mulDiv(a, b, c int64, up bool) int64 {
	n := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	q, r := new(big.Int).QuoRem(n, big.NewInt(c), new(big.Int))
	if up && r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// ceilingAt is the amount budget bucket had in force at t, read from the
// audit trail (oldest first) as the store keeps it: the changes before t
// replayed — a permanent one replaces what was set, a temporary one is in
// force until it lapses and then gives way to what was in force before it
// (an earlier change still lasting, else the configured amount) —; with
// no change before t, what the first later change replaced; with none at
// all, configured. November shows November's ceiling, not today's.
func ceilingAt(trail []auditEntry, bucket string, configured int64, t time.Time) int64 {
	type step struct {
		amount int64
		until  *time.Time
	}
	var chain []step // latest first
	seen := false
	for i := range trail {
		e := &trail[i]
		if (e.Action != "set_ceiling" && e.Action != "freeze" && e.Action != "unfreeze" && e.Action != "schedule_ceiling") || e.Target != bucket {
			continue
		}
		if !e.Time.Before(t) {
			if !seen {
				if v, ok := amountOf(e.Old); ok {
					return v
				}
			}
			break
		}
		seen = true
		if e.Action == "unfreeze" {
			// The freeze in force ends: what it lapsed to is back.
			for j, s := range chain {
				if s.until == nil || s.until.After(e.Time) {
					chain = chain[j+1:]
					break
				}
			}
			continue
		}
		v, ok := amountOf(e.New)
		if !ok {
			continue
		}
		if e.Action == "schedule_ceiling" && e.From != nil {
			// What was in force stays until From; v holds from then on.
			if was, ok := amountOf(e.Old); ok {
				chain = []step{{was, e.From}, {v, nil}}
			}
			continue
		}
		if e.Action == "freeze" {
			e = &auditEntry{Time: e.Time, Until: &frozenUntil}
		}
		if e.Until == nil {
			chain = []step{{v, nil}}
			continue
		}
		kept := []step{{v, e.Until}}
		for _, s := range chain {
			if s.until == nil || s.until.After(e.Time) {
				kept = append(kept, s)
				if s.until == nil {
					break
				}
			}
		}
		chain = kept
	}
	for _, s := range chain {
		if s.until == nil || s.until.After(t) {
			return s.amount
		}
	}
	return configured
}

// amountOf reads an audit entry's old or new amount, as kept (int64) or as
// read back from JSON (a float64 or a json.Number).
func amountOf(v any) (int64, bool) {
	switch n := v.(type) {
	case budget.Money:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

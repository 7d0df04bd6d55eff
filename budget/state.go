package budget

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is the counters a store keeps: one theoretical arrival time per Rate
// bucket, spent and pending per Ceiling bucket and period, and in-flight
// counts per Concurrency bucket. A missing counter reads as zero.
//
// Apply and SettleDebits run the whole algorithm over a State; a store only
// keeps the counters and makes each call atomic (the embedded store holds a
// mutex around it; the Redis store runs the same steps in one Lua script).
// Implementations need not be safe for concurrent use.
type State interface {
	RateTAT(bucket string) int64
	SetRateTAT(bucket string, tat int64)
	CeilingUse(bucket, period string) (spent, pending int64)
	SetCeilingUse(bucket, period string, spent, pending int64)
	InFlight(bucket string) int64
	SetInFlight(bucket string, n int64)
	// CeilingOverride is a ceiling set at run time for a Ceiling bucket
	// (finance raising or freezing a budget), which replaces the
	// configured amount in every period until it expires: ok is false
	// for none, or for one whose expiry is at or before now (unix µs).
	CeilingOverride(bucket string, now int64) (amount int64, ok bool)
	// LogEntries returns a sliding log's entries at or after since (unix
	// µs), oldest first, as (at, amount) pairs, dropping older ones.
	LogEntries(bucket string, since int64) [][2]int64
	// SetLogEntry records (amount > 0) or removes (0) reservation id's
	// entry at unix µs at.
	SetLogEntry(bucket, id string, at, amount int64)
}

// Debit is what one reservation took from one bucket.
type Debit struct {
	Limit  Limit
	Amount int64  // in Limit.Unit; 1 for Concurrency
	Period string // the Ceiling period (or window, or log entry time) charged, fixed at reservation time
	at     int64  // when the debit is judged, unix µs (set with Period): a sliding log entry's time, a temporary ceiling's clock
}

// Result is a store's answer to a reservation.
type Result struct {
	Allowed bool
	// Decider is the index of the limit that refused or, when allowed, of
	// the limit with the least room left relative to its capacity. -1 when
	// there are no limits.
	Decider int
	// RetryAfter is how long until the refused request could fit (zero when
	// allowed).
	RetryAfter time.Duration
	// Status holds one entry per limit, in order, after the reservation (or
	// as found, when refused).
	Status []Status
	// Shadowed lists the shadow limits (by index) that would have refused;
	// their debits were not taken.
	Shadowed []int
}

// Taken returns the debits a reservation really took: all but the shadow
// limits that would have refused.
func Taken(debits []Debit, res Result) []Debit {
	if len(res.Shadowed) == 0 {
		return debits
	}
	out := make([]Debit, 0, len(debits)-len(res.Shadowed))
	for i := range debits {
		if !slices.Contains(res.Shadowed, i) {
			out = append(out, debits[i])
		}
	}
	return out
}

// Status is what is left in one bucket.
type Status struct {
	// Capacity is the limit in force: the configured amount, or a ceiling
	// set at run time.
	Capacity  int64
	Remaining int64 // units that can still be taken; never negative
	// Held is what a Ceiling's reservations in flight hold (this one's
	// included, when allowed).
	Held int64
	// Spent is a Ceiling's or a Meter's settled spend in its period, as
	// it is: it can pass Capacity. A settlement may cost more than its
	// reservation, spend let through while the store was away is charged
	// when it answers, a late correction or a sweep charges what it
	// charges, and finance may set a ceiling below what is spent. Only
	// below the ceiling is it Capacity - Remaining - Held.
	Spent      int64
	ResetAfter time.Duration // until a Rate bucket is full again or a Ceiling's or Meter's period ends
}

// Used is what a limit has taken: a Ceiling's settled spend plus what
// reservations in flight hold — past Capacity when the spend is, where
// Remaining stops at zero —, a Meter's spend, and Capacity - Remaining
// for the other kinds (which keep no Spent or Held).
func (s Status) Used() int64 {
	return max(s.Capacity-s.Remaining, s.Spent+s.Held)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// RateCost is how many microseconds of a Rate bucket n units take:
// ceil(n * window / amount). A bucket's tolerance is RateCost(Capacity()).
func RateCost(l *Limit, n int64) (int64, error) {
	return mulDivCeil(n, l.Window.Microseconds(), l.Amount)
}

// Counters are one bucket's state as read before a reservation: a Rate
// bucket's theoretical arrival time (unix µs), a Ceiling period's spent and
// pending, a Concurrency bucket's requests in flight.
type Counters struct {
	TAT, Spent, Pending, InFlight int64
	// Prev is a sliding window's previous window count.
	Prev int64
	// Override, when HasOverride, is a Ceiling's amount set at run time.
	Override    int64
	HasOverride bool
}

func read(st State, d *Debit) Counters {
	l := &d.Limit
	if l.Kind == Rate && l.Algorithm == SlidingLog {
		w := l.Window.Microseconds()
		entries := st.LogEntries(l.Bucket, d.at-w+1)
		var used int64
		for _, e := range entries {
			used += e[1]
		}
		return Counters{Spent: used, TAT: LogFreeAt(entries, used, d.Amount, l.Amount, w)}
	}
	if l.windowed() {
		spent, pending := st.CeilingUse(l.Bucket, d.Period)
		c := Counters{Spent: spent, Pending: pending}
		if l.Algorithm == SlidingWindow {
			ps, pp := st.CeilingUse(l.Bucket, prevWindow(d))
			c.Prev = ps + pp
		}
		return c
	}
	switch l.Kind {
	case Rate:
		return Counters{TAT: st.RateTAT(l.Bucket)}
	case Ceiling:
		spent, pending := st.CeilingUse(l.Bucket, d.Period)
		o, ok := st.CeilingOverride(l.Bucket, d.at)
		return Counters{Spent: spent, Pending: pending, Override: o, HasOverride: ok}
	case Meter:
		spent, _ := st.CeilingUse(l.Bucket, d.Period)
		return Counters{Spent: spent}
	case Concurrency:
		return Counters{InFlight: st.InFlight(l.Bucket)}
	}
	return Counters{}
}

// decide judges one debit against the counters its bucket had before.
func decide(d *Debit, c Counters, now time.Time) (ok bool, s Status, retry time.Duration, err error) {
	l := &d.Limit
	if l.windowed() {
		return decideWindow(d, c, now)
	}
	if l.Kind == Rate && l.Algorithm == SlidingLog {
		return decideLog(d, c, now)
	}
	switch l.Kind {
	case Rate:
		nowUs := micros(now)
		tat := max(c.TAT, nowUs)
		cost, err := RateCost(l, d.Amount)
		if err != nil {
			return false, s, 0, err
		}
		tol, err := RateCost(l, l.Capacity())
		if err != nil {
			return false, s, 0, err
		}
		if cost > tol {
			return false, rateStatus(l, tat, nowUs, tol), 0, ErrTooLarge
		}
		newTAT := tat + cost
		if newTAT-nowUs > tol {
			return false, rateStatus(l, tat, nowUs, tol), time.Duration(newTAT-nowUs-tol) * time.Microsecond, ErrRateLimited
		}
		return true, rateStatus(l, newTAT, nowUs, tol), 0, nil
	case Ceiling:
		ceiling := l.Amount
		if c.HasOverride {
			ceiling = c.Override
		}
		used := c.Spent + c.Pending
		reset := PeriodEnd(l.Period, now, l.Location).Sub(now)
		if d.Amount > ceiling-used {
			st := Status{Capacity: ceiling, Remaining: max(0, ceiling-used), Held: c.Pending, Spent: c.Spent, ResetAfter: reset}
			switch {
			case c.Spent >= ceiling:
				return false, st, reset, ErrExhausted
			case d.Amount > ceiling-c.Spent:
				return false, st, reset, ErrOverBudget
			}
			return false, st, HeldRetry, ErrHeld
		}
		return true, Status{Capacity: ceiling, Remaining: ceiling - used - d.Amount, Held: c.Pending + d.Amount, Spent: c.Spent, ResetAfter: reset}, 0, nil
	case Meter:
		return true, Status{Spent: c.Spent, ResetAfter: PeriodEnd(l.Period, now, l.Location).Sub(now)}, 0, nil
	case Concurrency:
		n := c.InFlight
		if n+d.Amount > l.Amount {
			return false, Status{Capacity: l.Amount, Remaining: max(0, l.Amount-n)}, time.Second, ErrConcurrency
		}
		return true, Status{Capacity: l.Amount, Remaining: l.Amount - n - d.Amount}, 0, nil
	}
	return false, s, 0, fmt.Errorf("budget: limit %s: unknown kind %v", l.Bucket, l.Kind)
}

func rateStatus(l *Limit, tat, now, tol int64) Status {
	// Room left is the part of the tolerance not yet taken, in units.
	room := max(0, tol-(tat-now))
	rem, err := mulDivFloor(room, l.Amount, l.Window.Microseconds())
	if err != nil {
		rem = 0
	}
	return Status{Capacity: l.Capacity(), Remaining: min(rem, l.Capacity()), ResetAfter: time.Duration(max(0, tat-now)) * time.Microsecond}
}

// SetPeriods fixes each Ceiling debit's period from now.
func SetPeriods(debits []Debit, now time.Time) {
	for i := range debits {
		d := &debits[i]
		d.at = micros(now)
		switch {
		case d.Limit.Kind == Ceiling || d.Limit.Kind == Meter:
			d.Period = PeriodID(d.Limit.Period, now, d.Limit.Location)
		case d.Limit.windowed():
			idx, _, _ := windowOf(&d.Limit, now)
			d.Period = WindowID(&d.Limit, idx)
		case d.Limit.Kind == Rate && d.Limit.Algorithm == SlidingLog:
			d.Period = strconv.FormatInt(d.at, 10) // the entry's time, kept with the reservation
		}
	}
}

// Evaluate decides a whole reservation from the counters its buckets had
// before it: allowed only if every debit fits. It changes nothing; a store
// applies the debits when Result.Allowed. The error is nil when allowed, one
// of the refusal sentinels when refused, or an unexpected error.
func Evaluate(debits []Debit, counters []Counters, now time.Time) (Result, error) {
	res := Result{Allowed: true, Decider: -1, Status: make([]Status, len(debits))}
	var refusal error
	tightest := 2.0
	for i := range debits {
		d := &debits[i]
		ok, s, retry, err := decide(d, counters[i], now)
		res.Status[i] = s
		switch {
		case ok:
			if !res.Allowed || !d.Limit.Enforced() {
				continue // a shadow limit or a meter never decides
			}
			if f := fraction(s); f < tightest {
				tightest, res.Decider = f, i
			}
		case isRefusal(err) && d.Limit.Shadow:
			res.Shadowed = append(res.Shadowed, i)
		case isRefusal(err):
			// The strictest refusal decides: the one that makes the client
			// wait longest (a spent budget beats a busy rate bucket).
			if res.Allowed || retry > res.RetryAfter || err == ErrTooLarge && refusal != ErrTooLarge {
				res.Decider, res.RetryAfter, refusal = i, retry, err
			}
			res.Allowed = false
		default:
			return Result{Decider: -1}, err
		}
	}
	if !res.Allowed {
		// Refused: every limit reports what it had, as found, so a caller
		// can tell how much of each is free now.
		for i := range debits {
			if d := debits[i]; !slices.Contains(res.Shadowed, i) {
				d.Amount = 0
				if ok, s, _, _ := decide(&d, counters[i], now); ok {
					res.Status[i] = s
				}
			}
		}
		return res, refusal
	}
	return res, nil
}

// Apply checks every debit and, only if all fit, applies all of them: all or
// nothing. It fills in each Ceiling debit's Period from now.
func Apply(st State, id string, debits []Debit, now time.Time) (Result, error) {
	SetPeriods(debits, now)
	counters := make([]Counters, len(debits))
	for i := range debits {
		counters[i] = read(st, &debits[i])
	}
	res, err := Evaluate(debits, counters, now)
	if err != nil || !res.Allowed {
		return res, err
	}
	for _, d := range Taken(debits, res) {
		take(st, &d, id, now)
	}
	return res, nil
}

func isRefusal(err error) bool {
	return err == ErrRateLimited || err == ErrExhausted || err == ErrOverBudget || err == ErrHeld || err == ErrConcurrency || err == ErrTooLarge
}

func fraction(s Status) float64 {
	if s.Capacity <= 0 {
		return 0
	}
	return float64(s.Remaining) / float64(s.Capacity)
}

func take(st State, d *Debit, id string, now time.Time) {
	l := &d.Limit
	if l.Kind == Rate && l.Algorithm == SlidingLog {
		st.SetLogEntry(l.Bucket, id, d.at, d.Amount)
		return
	}
	if l.windowed() {
		spent, pending := st.CeilingUse(l.Bucket, d.Period)
		st.SetCeilingUse(l.Bucket, d.Period, spent, pending+d.Amount)
		return
	}
	switch l.Kind {
	case Rate:
		cost, _ := RateCost(l, d.Amount) // checked in check
		st.SetRateTAT(l.Bucket, max(st.RateTAT(l.Bucket), micros(now))+cost)
	case Ceiling:
		spent, pending := st.CeilingUse(l.Bucket, d.Period)
		st.SetCeilingUse(l.Bucket, d.Period, spent, pending+d.Amount)
	case Concurrency:
		st.SetInFlight(l.Bucket, st.InFlight(l.Bucket)+d.Amount)
	} // a Meter takes nothing until settlement
}

// SettleDebits resolves a reservation: each Ceiling moves the reserved amount
// from pending to the actual amount spent (in the period it was reserved in);
// each Rate bucket gets the difference refunded or charged (possibly into
// debt); each Meter counts the actual amount; each Concurrency slot is freed.
func SettleDebits(st State, id string, debits []Debit, actual Amounts, now time.Time) error {
	if err := actual.Validate(); err != nil {
		return err
	}
	for i := range debits {
		d := &debits[i]
		l := &d.Limit
		a := actual.Of(l.Unit)
		if l.Kind == Rate && l.Algorithm == SlidingLog {
			at, _ := strconv.ParseInt(d.Period, 10, 64)
			st.SetLogEntry(l.Bucket, id, at, a)
			continue
		}
		if l.windowed() {
			// A window counts what was used in it, settled like a budget.
			spent, pending := st.CeilingUse(l.Bucket, d.Period)
			st.SetCeilingUse(l.Bucket, d.Period, spent+a, max(0, pending-d.Amount))
			continue
		}
		switch l.Kind {
		case Rate:
			reserved, err := RateCost(l, d.Amount)
			if err != nil {
				return err
			}
			used, err := RateCost(l, a)
			if err != nil {
				return err
			}
			nowUs := micros(now)
			st.SetRateTAT(l.Bucket, max(max(st.RateTAT(l.Bucket), nowUs)+used-reserved, nowUs))
		case Ceiling:
			spent, pending := st.CeilingUse(l.Bucket, d.Period)
			st.SetCeilingUse(l.Bucket, d.Period, spent+a, max(0, pending-d.Amount))
		case Meter:
			spent, pending := st.CeilingUse(l.Bucket, d.Period)
			st.SetCeilingUse(l.Bucket, d.Period, spent+a, pending)
		case Concurrency:
			st.SetInFlight(l.Bucket, max(0, st.InFlight(l.Bucket)-d.Amount))
		}
	}
	return nil
}

// CorrectSwept turns the charge of a reservation the sweeper resolved at
// its reserved amounts (its lease ran out before the settlement came) into
// the actual amounts: each Ceiling and window gets the difference refunded,
// or charged, in the period it was charged to, never below zero spent; a
// sliding log's entry takes the actual amount if it is still in the log.
// Rate buckets and concurrency slots are left as they are: their state has
// moved on since, and the sweep already freed the slots. The caller makes
// sure a reservation is corrected once.
func CorrectSwept(st State, id string, debits []Debit, actual Amounts) error {
	if err := actual.Validate(); err != nil {
		return err
	}
	for i := range debits {
		d := &debits[i]
		l := &d.Limit
		a := actual.Of(l.Unit)
		switch {
		case l.Kind == Rate && l.Algorithm == SlidingLog:
			at, _ := strconv.ParseInt(d.Period, 10, 64)
			for _, e := range st.LogEntries(l.Bucket, at) {
				if e[0] == at {
					st.SetLogEntry(l.Bucket, id, at, a)
					break
				}
			}
		case l.Kind == Ceiling || l.Kind == Meter || l.windowed():
			spent, pending := st.CeilingUse(l.Bucket, d.Period)
			st.SetCeilingUse(l.Bucket, d.Period, max(0, spent+a-d.Amount), pending)
		}
	}
	return nil
}

// Peek reports each limit's status without changing anything.
func Peek(st State, limits []Limit, now time.Time) []Status {
	debits := make([]Debit, len(limits))
	counters := make([]Counters, len(limits))
	for i := range limits {
		debits[i] = Debit{Limit: limits[i]}
	}
	SetPeriods(debits, now)
	for i := range debits {
		counters[i] = read(st, &debits[i])
	}
	return StatusOf(debits, counters, now)
}

// StatusOf reports what is left in each debit's bucket, given its counters,
// as if nothing were taken.
func StatusOf(debits []Debit, counters []Counters, now time.Time) []Status {
	out := make([]Status, len(debits))
	for i := range debits {
		d := debits[i]
		d.Amount = 0
		_, out[i], _, _ = decide(&d, counters[i], now)
	}
	return out
}

// prevWindow is the id of the window before a windowed debit's own.
func prevWindow(d *Debit) string {
	_, idx, _ := strings.Cut(d.Period, ":")
	i, _ := strconv.ParseInt(idx, 10, 64)
	return WindowID(&d.Limit, i-1)
}

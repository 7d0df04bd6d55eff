package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
)

func TestPriceCost(t *testing.T) {
	gpt4o := budget.Price{Input: 2_500_000, CachedInput: 1_250_000, Output: 10_000_000} // $2.50 / $1.25 / $10 per 1M
	tests := []struct {
		desc string
		u    budget.Usage
		want budget.Money
	}{
		{"nothing", budget.Usage{}, 0},
		{"one input token rounds up", budget.Usage{InputTokens: 1}, 3},
		{"1M in, 1M out", budget.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 12_500_000},
		{"cached part at its own rate", budget.Usage{InputTokens: 1_000_000, CachedInputTokens: 400_000}, 1_500_000 + 500_000},
		{"typical chat", budget.Usage{InputTokens: 1234, OutputTokens: 567}, 3085 + 5670},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := gpt4o.Cost(tc.u)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Cost = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPriceCostRefusesBadUsage(t *testing.T) {
	p := budget.Price{Input: 1, Output: 1 << 62}
	for _, u := range []budget.Usage{
		{InputTokens: -1},
		{InputTokens: 5, CachedInputTokens: 6},
		{OutputTokens: 1 << 41},
		{OutputTokens: 1 << 39}, // in range, but the product overflows int64
	} {
		if c, err := p.Cost(u); err == nil {
			t.Errorf("Cost(%+v) = %d, want an error", u, c)
		}
	}
}

func TestMoneyString(t *testing.T) {
	for m, want := range map[budget.Money]string{0: "$0.000000", 1_250_000: "$1.250000", -7: "-$0.000007"} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int64(m), got, want)
		}
	}
}

func TestPeriods(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		p       budget.Period
		at      time.Time
		loc     *time.Location
		wantID  string
		wantEnd time.Time
	}{
		{"month in UTC", budget.Month, time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC), nil, "2026-11", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"already December in UTC is still November in New York", budget.Month, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), ny, "2026-11", time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)},
		{"year rollover", budget.Month, time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), nil, "2026-12", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"day across a DST change is 25 hours", budget.Day, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), ny, "2026-11-01", time.Date(2026, 11, 2, 5, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := budget.PeriodID(tc.p, tc.at, tc.loc); got != tc.wantID {
				t.Errorf("PeriodID = %q, want %q", got, tc.wantID)
			}
			if got := budget.PeriodEnd(tc.p, tc.at, tc.loc); !got.Equal(tc.wantEnd) {
				t.Errorf("PeriodEnd = %v, want %v", got, tc.wantEnd)
			}
		})
	}
}

func TestEngineNamesTheDecidingLimit(t *testing.T) {
	s, _ := memstore.New(memstore.Options{})
	e := budget.NewEngine(s, 0)
	limits := []budget.Limit{
		{Bucket: "org", Name: "org-usd-month", Scope: budget.ScopeOrg, Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: 1000, Period: budget.Month},
		{Bucket: "team", Name: "team-usd-day", Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: 10, Period: budget.Day},
	}
	_, _, err := e.Reserve(context.Background(), limits, budget.Amounts{Cost: 11, Requests: 1})
	var refused *budget.RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, budget.ErrOverBudget) {
		t.Fatalf("err = %v, want a RefusedError wrapping ErrOverBudget", err)
	}
	if refused.Limit.Name != "team-usd-day" {
		t.Fatalf("decided by %q, want team-usd-day", refused.Limit.Name)
	}
	if _, _, err := e.Reserve(context.Background(), append(limits, limits[0]), budget.Amounts{Cost: 1}); err == nil {
		t.Fatal("a bucket listed twice was accepted")
	}
	if _, _, err := e.Reserve(context.Background(), limits, budget.Amounts{Cost: -1}); err == nil {
		t.Fatal("a negative estimate was accepted")
	}
}

func Example() {
	store, _ := memstore.New(memstore.Options{})
	engine := budget.NewEngine(store, time.Minute)
	team := budget.Limit{Bucket: "team:ml", Name: "ml-monthly", Scope: budget.ScopeTeam,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(5 * budget.Dollar), Period: budget.Month}
	ctx := context.Background()

	// Reserve the upper bound of a request before forwarding it…
	r, res, err := engine.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: 3 * budget.Dollar, Requests: 1})
	fmt.Println(err, budget.Money(res.Status[0].Remaining))
	// …and settle what the upstream reported.
	outcome, _ := engine.Settle(ctx, r, budget.Amounts{Cost: 1_200_000, Requests: 1})
	st, _ := engine.Peek(ctx, []budget.Limit{team})
	fmt.Println(outcome, budget.Money(st[0].Remaining))

	_, _, err = engine.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: 4 * budget.Dollar, Requests: 1})
	// $4 is more than the $3.80 left: a smaller request would fit.
	fmt.Println(errors.Is(err, budget.ErrOverBudget))
	// Output:
	// <nil> $2.000000
	// settled $3.800000
	// true
}

// An upstream billed more than was reserved: the spend passes the
// ceiling, and is read as it is. Remaining stops at zero.
func ExampleStatus_Used() {
	store, _ := memstore.New(memstore.Options{})
	engine := budget.NewEngine(store, time.Minute)
	team := budget.Limit{Bucket: "team:ml", Name: "ml-monthly", Scope: budget.ScopeTeam,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(budget.Dollar), Period: budget.Month}
	ctx := context.Background()

	r, _, _ := engine.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: 500_000, Requests: 1})
	_, _ = engine.Settle(ctx, r, budget.Amounts{Cost: 2_890_000, Requests: 1})
	st, _ := engine.Peek(ctx, []budget.Limit{team})
	s := st[0]
	fmt.Println(budget.Money(s.Used()).Dollars(), "of", budget.Money(s.Capacity).Dollars(), "used;",
		budget.Money(s.Remaining).Dollars(), "left; ratio", float64(s.Used())/float64(s.Capacity))
	// Output:
	// $2.89 of $1.00 used; $0.00 left; ratio 2.89
}

func TestMoneyDollars(t *testing.T) {
	for m, want := range map[budget.Money]string{
		0: "$0.00", 1_200_500_000: "$1,200.50", 1_200: "$0.0012", 10 * budget.Dollar: "$10.00",
		1_234_567_891_234: "$1,234,567.891234", -2_500_000: "-$2.50", 999_999: "$0.999999",
	} {
		if got := m.Dollars(); got != want {
			t.Errorf("Money(%d).Dollars() = %q, want %q", int64(m), got, want)
		}
	}
	for m, want := range map[budget.Money]string{
		0: "$0.00", 1: "$0.00", 4_999: "$0.00", 5_000: "$0.01", 3_810_267: "$3.81", 1_234_567_895_000: "$1,234,567.90", -2_505_000: "-$2.51", -1: "$0.00",
	} {
		if got := m.Cents(); got != want {
			t.Errorf("Money(%d).Cents() = %q, want %q", int64(m), got, want)
		}
	}
	for m, want := range map[budget.Money]string{0: "0.00", 1_200_500_000: "1200.50", 1_200: "0.0012", -2_500_000: "-2.50"} {
		if got := m.Decimal(); got != want {
			t.Errorf("Money(%d).Decimal() = %q, want %q", int64(m), got, want)
		}
	}
}

// TestPeriodIDIsTheCalendarFormat: the digits written by hand are what
// time.Format writes, in several zones, years and around midnights.
func TestPeriodIDIsTheCalendarFormat(t *testing.T) {
	zones := []*time.Location{nil, time.UTC, time.FixedZone("w", -11*3600), time.FixedZone("e", 14*3600), time.FixedZone("n", 5*3600+45*60)}
	for i := range 20000 {
		sec := int64(i)*7919*3607 - 3e9
		if i%50 == 0 {
			sec = int64(i)*1e8 - 62135596800 + 86399 // years 0001 and later, at the edge of a day
		}
		tm := time.Unix(sec, 0)
		for _, loc := range zones {
			lt := tm.In(time.UTC)
			if loc != nil {
				lt = tm.In(loc)
			}
			if got, want := budget.PeriodID(budget.Day, tm, loc), lt.Format("2006-01-02"); got != want {
				t.Fatalf("PeriodID(Day, %v, %v) = %q, want %q", tm, loc, got, want)
			}
			if got, want := budget.PeriodID(budget.Month, tm, loc), lt.Format("2006-01"); got != want {
				t.Fatalf("PeriodID(Month, %v, %v) = %q, want %q", tm, loc, got, want)
			}
		}
	}
}

// TestPeriodsWalkedInTime: read every few minutes (as requests read them,
// each span handed out again until it ends), forward and then back in
// time, with fractions of a second, a period's id, start and end
// are what the calendar says — in zones whose clocks change at midnight
// too, where time.Date puts a day's midnight on the day before (Bissau,
// 1 January 1975; Araguaina, 2 November 1985) or after a first midnight
// of the same date (Tunis, 24 September 1977).
func TestPeriodsWalkedInTime(t *testing.T) {
	walks := []struct {
		zone     string
		from, to string
	}{
		{"America/Santiago", "2011-12-20", "2014-01-01"}, {"Asia/Beirut", "2011-12-20", "2014-01-01"},
		{"America/Havana", "2011-12-20", "2013-01-01"}, {"Africa/Cairo", "2023-04-20", "2023-11-05"},
		{"Europe/Berlin", "2012-03-20", "2012-11-01"}, {"Pacific/Apia", "2011-12-25", "2012-01-05"},
		{"Africa/Bissau", "1974-12-25", "1975-01-05"}, {"Africa/Tunis", "1977-09-20", "1977-10-05"},
		{"America/Araguaina", "1985-10-28", "1985-11-05"}, {"", "2012-12-25", "2013-01-05"},
	}
	for _, w := range walks {
		var loc *time.Location // nil: UTC
		if w.zone != "" {
			var err error
			if loc, err = time.LoadLocation(w.zone); err != nil {
				t.Fatal(err)
			}
		}
		l := loc
		if l == nil {
			l = time.UTC
		}
		from, _ := time.Parse(time.DateOnly, w.from)
		to, _ := time.Parse(time.DateOnly, w.to)
		var times []time.Time
		for tm := from; tm.Before(to); tm = tm.Add(7*time.Minute + 13*time.Second) {
			times = append(times, tm)
		}
		for i := range 2 * len(times) { // forward, then back: a clock read on another thread may be earlier
			var tm time.Time
			if i < len(times) {
				tm = times[i]
			} else {
				tm = times[2*len(times)-1-i].Add(time.Duration(i%1000) * time.Millisecond)
			}
			lt := tm.In(l)
			y, m, d := lt.Date()
			for _, p := range []budget.Period{budget.Day, budget.Month} {
				id, start, end := lt.Format("2006-01"), time.Date(y, m, 1, 0, 0, 0, 0, l), time.Date(y, m+1, 1, 0, 0, 0, 0, l)
				if p == budget.Day {
					id, start, end = lt.Format("2006-01-02"), time.Date(y, m, d, 0, 0, 0, 0, l), time.Date(y, m, d+1, 0, 0, 0, 0, l)
				}
				if got := budget.PeriodID(p, tm, loc); got != id {
					t.Fatalf("PeriodID(%v, %v, %v) = %q, want %q", p, tm, l, got, id)
				}
				if got := budget.PeriodStart(p, tm, loc); !got.Equal(start) {
					t.Fatalf("PeriodStart(%v, %v, %v) = %v, want %v", p, tm, l, got, start)
				}
				if got := budget.PeriodEnd(p, tm, loc); !got.Equal(end) {
					t.Fatalf("PeriodEnd(%v, %v, %v) = %v, want %v", p, tm, l, got, end)
				}
			}
		}
	}
}

// TestMoneyDigitsAreFmts: the digits written by hand are fmt's, for
// random amounts and the extremes; Micros is String without the sign of
// the dollar (and with the minus before the figure).
func TestMoneyDigitsAreFmts(t *testing.T) {
	vals := []int64{0, 1, -1, 999_999, 1_000_000, -1_000_001, 1200_500_000, math.MaxInt64, math.MinInt64}
	for i := range 10000 {
		vals = append(vals, int64(i)*7919*104729-3e10, int64(uint64(i)*0x9E3779B97F4A7C15))
	}
	for _, v := range vals {
		u := uint64(v)
		sign := ""
		if v < 0 {
			sign, u = "-", -u
		}
		want := fmt.Sprintf("%s$%d.%06d", sign, u/1_000_000, u%1_000_000)
		if got := budget.Money(v).String(); got != want {
			t.Fatalf("Money(%d).String() = %q, want %q", v, got, want)
		}
		if got, want := budget.Money(v).Micros(), sign+want[len(sign)+1:]; got != want {
			t.Fatalf("Money(%d).Micros() = %q, want %q", v, got, want)
		}
	}
}

// TestPartitionBytes: a partition holding a byte the Redis store uses in
// its keys ('/', '{', '}', '~') is refused, anywhere in it.
func TestPartitionBytes(t *testing.T) {
	l := budget.Limit{Bucket: "b", Name: "n", Scope: budget.ScopeOrg, Kind: budget.Concurrency, Unit: budget.Requests, Amount: 1}
	for _, p := range []string{"", "org", "org-1.x_y"} {
		l.Partition = p
		if err := l.Validate(); err != nil {
			t.Errorf("partition %q: %v", p, err)
		}
	}
	for _, p := range []string{"/", "a{", "}b", "a~b", "org/team"} {
		l.Partition = p
		if err := l.Validate(); err == nil {
			t.Errorf("partition %q was accepted", p)
		}
	}
}

// TestPeriodIDReused: asked again for the period it made last, PeriodID
// hands out the same string without making another (it is asked at every
// request, for every budget), and still the right one when the period
// changes.
func TestPeriodIDReused(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, p := range []budget.Period{budget.Day, budget.Month} {
		budget.PeriodID(p, now, nil)
		if n := testing.AllocsPerRun(100, func() { budget.PeriodID(p, now, nil) }); n != 0 {
			t.Errorf("period %v: %v allocations", p, n)
		}
	}
	if a, b := budget.PeriodID(budget.Day, now, nil), budget.PeriodID(budget.Day, now.AddDate(0, 0, 1), nil); a != "2026-12-02" || b != "2026-12-03" {
		t.Fatalf("got %q then %q", a, b)
	}
}

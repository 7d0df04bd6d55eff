package admin

import (
	"testing"
	"time"
)

// The ceiling in force at a past instant, replayed from the audit trail as
// the store keeps it: a temporary change gives way to what was in force
// before it, not to the configured amount.
func TestCeilingAtReplaysTemporaryChanges(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	until := func(d int) *time.Time { u := day(d); return &u }
	trail := []auditEntry{
		{Time: day(2), Action: "set_ceiling", Target: "b", Old: int64(100), New: int64(300)},                   // permanent $300
		{Time: day(5), Action: "set_ceiling", Target: "b", Old: int64(300), New: int64(500), Until: until(12)}, // a week's $500
		{Time: day(8), Action: "set_ceiling", Target: "b", Old: int64(500), New: int64(600), Until: until(10)}, // two days' $600 on top
		{Time: day(20), Action: "set_ceiling", Target: "b", Old: int64(300), New: int64(0)},                    // frozen
		{Time: day(22), Action: "set_ceiling", Target: "b", Old: int64(0), New: int64(50), Until: until(24)},   // a one-off top-up
		{Time: day(3), Action: "set_ceiling", Target: "other", Old: int64(1), New: int64(2)},
	}
	for _, tc := range []struct {
		at   int
		want int64
	}{{1, 100}, {3, 300}, {6, 500}, {9, 600}, {11, 500}, {13, 300}, {21, 0}, {23, 50}, {25, 0}} {
		if got := ceilingAt(trail, "b", 100, day(tc.at)); got != tc.want {
			t.Errorf("on day %d: %d, want %d", tc.at, got, tc.want)
		}
	}
}

// A freeze is in force until it is unfrozen, then what was before it is
// back — in the past months' replay as in the store.
func TestCeilingAtReplaysFreezes(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	trail := []auditEntry{
		{Time: day(2), Action: "set_ceiling", Target: "b", Old: int64(100), New: int64(300)},
		{Time: day(5), Action: "freeze", Target: "b", Old: int64(300), New: int64(0)},
		{Time: day(9), Action: "unfreeze", Target: "b", Old: int64(0), New: int64(300)},
	}
	for _, tc := range []struct {
		at   int
		want int64
	}{{1, 100}, {3, 300}, {6, 0}, {8, 0}, {10, 300}} {
		if got := ceilingAt(trail, "b", 100, day(tc.at)); got != tc.want {
			t.Errorf("on day %d: %d, want %d", tc.at, got, tc.want)
		}
	}
}

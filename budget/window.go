package budget

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Algorithm is how a Rate limit counts.
type Algorithm uint8

const (
	// TokenBucket (the default; also what GCRA is): Burst units of
	// capacity refilled continuously; bursts allowed, no window edges.
	TokenBucket Algorithm = iota
	// FixedWindow counts per calendar-aligned window of Window: one
	// counter, but up to twice Amount can pass around a window edge.
	FixedWindow
	// SlidingWindow weighs the previous window's count by the share of it
	// still inside the sliding window and adds the current one: O(1)
	// memory, no edge burst, an approximation that assumes the previous
	// window's requests were evenly spread.
	SlidingWindow
	// SlidingLog keeps one entry per request and counts exactly what fell
	// inside the last Window: no approximation, but memory and time grow
	// with the limit (the config caps it).
	SlidingLog
)

// MaxSlidingLog bounds a sliding log's Amount: its memory and the work of
// each reservation grow with it.
const MaxSlidingLog = 10_000

func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "fixed_window"
	case SlidingWindow:
		return "sliding_window"
	case SlidingLog:
		return "sliding_log"
	}
	return "token_bucket"
}

// windowed reports a Rate limit counted per window.
func (l *Limit) windowed() bool {
	return l.Kind == Rate && (l.Algorithm == FixedWindow || l.Algorithm == SlidingWindow)
}

// windowOf returns the index and bounds (unix µs) of the window holding now.
func windowOf(l *Limit, now time.Time) (idx, start, end int64) {
	w := l.Window.Microseconds()
	us := micros(now)
	idx = us / w
	return idx, idx * w, (idx + 1) * w
}

// WindowID names a window's counter: its size and index.
func WindowID(l *Limit, idx int64) string {
	return "w" + strconv.FormatInt(l.Window.Microseconds(), 10) + ":" + strconv.FormatInt(idx, 10)
}

// WindowBounds returns the bounds (unix µs) of the window holding now and
// the id of the window before it, for a store that checks them itself.
func WindowBounds(l *Limit, now time.Time) (start, end int64, prev string) {
	idx, start, end := windowOf(l, now)
	return start, end, WindowID(l, idx-1)
}

// WindowExpired reports whether the counter id (from WindowID) can no
// longer be read at now: windows are read for two windows' time (as the
// current one, then as the previous one of a sliding window).
func WindowExpired(id string, now time.Time) bool {
	size, idx, ok := strings.Cut(strings.TrimPrefix(id, "w"), ":")
	if !ok || !strings.HasPrefix(id, "w") {
		return false
	}
	w, err1 := strconv.ParseInt(size, 10, 64)
	i, err2 := strconv.ParseInt(idx, 10, 64)
	return err1 == nil && err2 == nil && w > 0 && (i+2)*w <= micros(now)
}

// SlidingWeight is the previous window's count still inside a sliding
// window at elapsed µs into the current one. Stores compute it the same
// way, in float64 (the Redis script's number type), so both agree exactly.
func SlidingWeight(prev, window, elapsed int64) int64 {
	return int64(math.Floor(float64(prev) * float64(window-elapsed) / float64(window)))
}

// decideWindow judges a windowed Rate debit.
func decideWindow(d *Debit, c Counters, now time.Time) (bool, Status, time.Duration, error) {
	l := &d.Limit
	_, start, end := windowOf(l, now)
	nowUs := micros(now)
	reset := time.Duration(end-nowUs) * time.Microsecond
	cur := c.Spent + c.Pending
	used := cur
	if l.Algorithm == SlidingWindow {
		used += SlidingWeight(c.Prev, l.Window.Microseconds(), nowUs-start)
	}
	st := Status{Capacity: l.Amount, Remaining: max(0, l.Amount-used), ResetAfter: reset}
	if d.Amount > l.Amount {
		return false, st, 0, ErrTooLarge
	}
	if used+d.Amount > l.Amount {
		retry := reset
		if l.Algorithm == SlidingWindow && c.Prev > 0 && cur+d.Amount <= l.Amount {
			// Wait until enough of the previous window has slid out.
			w := l.Window.Microseconds()
			target := float64(l.Amount-cur-d.Amount) * float64(w) / float64(c.Prev)
			if t := int64(math.Ceil(float64(w-(nowUs-start)) - target)); t > 0 && t < end-nowUs {
				retry = time.Duration(t) * time.Microsecond
			}
		}
		return false, st, retry, ErrRateLimited
	}
	st.Remaining = l.Amount - used - d.Amount
	return true, st, 0, nil
}

// decideLog judges a sliding-log debit: c.Spent is what the log holds
// inside the window, c.TAT when enough of it will have aged out (unix µs).
func decideLog(d *Debit, c Counters, now time.Time) (bool, Status, time.Duration, error) {
	l := &d.Limit
	st := Status{Capacity: l.Amount, Remaining: max(0, l.Amount-c.Spent), ResetAfter: l.Window}
	if d.Amount > l.Amount {
		return false, st, 0, ErrTooLarge
	}
	if c.Spent+d.Amount > l.Amount {
		return false, st, time.Duration(max(c.TAT-micros(now), 1)) * time.Microsecond, ErrRateLimited
	}
	st.Remaining = l.Amount - c.Spent - d.Amount
	return true, st, 0, nil
}

// LogFreeAt returns when (unix µs) enough of a log's entries — (at,
// amount) pairs, oldest first — leave a window of w µs for need more units
// to fit under limit; used is their total.
func LogFreeAt(entries [][2]int64, used, need, limit, w int64) int64 {
	var freed int64
	for _, e := range entries {
		if used-freed+need <= limit {
			break
		}
		freed += e[1]
		if used-freed+need <= limit {
			return e[0] + w
		}
	}
	return 0
}

func validateAlgorithm(l *Limit) error {
	if l.Algorithm == SlidingLog && l.Amount > MaxSlidingLog {
		return fmt.Errorf("budget: limit %s: a sliding log holds at most %d (its memory grows with the limit)", l.Bucket, MaxSlidingLog)
	}
	if l.Algorithm > SlidingLog {
		return fmt.Errorf("budget: limit %s: unknown algorithm %d", l.Bucket, l.Algorithm)
	}
	if l.Algorithm != TokenBucket && (l.Kind != Rate || l.Burst != 0) {
		return fmt.Errorf("budget: limit %s: %s is for rate limits without a burst", l.Bucket, l.Algorithm)
	}
	return nil
}

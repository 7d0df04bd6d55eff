package testkit

import (
	"testing"
	"time"
)

func TestClockFiresTimersInOrderAsItIsAdvanced(t *testing.T) {
	c := NewClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	var fired []int
	c.AfterFunc(2*time.Second, func() { fired = append(fired, 2) })
	c.AfterFunc(time.Second, func() { fired = append(fired, 1) })
	stopped := c.AfterFunc(time.Second, func() { fired = append(fired, 0) })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports whether the timer was still set")
	}
	c.Advance(999 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	c.Advance(2 * time.Second)
	if len(fired) != 2 || fired[0] != 1 || fired[1] != 2 {
		t.Fatalf("fired %v, want [1 2]", fired)
	}
	if got := c.Now(); !got.Equal(time.Date(2026, 11, 1, 0, 0, 2, 999_000_000, time.UTC)) {
		t.Fatalf("now %v", got)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	if !WaitFor(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("WaitFor stopped at %d checks", n)
	}
	if WaitFor(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("WaitFor held a condition that never held")
	}
}

// Package testkit is what tests share: one manual clock, whose timers fire
// as it is advanced, and waiting for a condition with a deadline instead
// of sleeping for a guessed time.
package testkit

import (
	"sort"
	"sync"
	"time"
)

// Clock is a timeline a test advances by hand. It is safe for concurrent
// use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and runs, in time order, the
// functions of every timer that came due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
	rest := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// AfterFunc runs f when the clock has been advanced by d, like
// time.AfterFunc.
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

type timer struct {
	c       *Clock
	at      time.Time
	f       func()
	stopped bool
}

// Stop keeps the timer from firing; it reports whether it was still set.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// WaitFor reports whether cond held within timeout, checking it at once
// and then every 10 ms: for what happens on its own time (another
// process, a background loop), never to pace a test's own steps.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

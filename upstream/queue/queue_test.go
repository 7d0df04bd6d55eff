package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testkit"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// drain steps a core along its own wake times until it has admitted n
// tickets, returning the admission times.
func drain(t *testing.T, c *Core, from time.Time, n int) []time.Time {
	t.Helper()
	var at []time.Time
	now := from
	for len(at) < n {
		admitted, wake := c.Admit(now)
		for range admitted {
			at = append(at, now)
		}
		if wake.IsZero() {
			if len(at) < n {
				t.Fatalf("stalled after %d admissions", len(at))
			}
			break
		}
		now = wake
	}
	return at
}

func TestDrainRateHoldsExactly(t *testing.T) {
	tests := []struct {
		desc     string
		cfg      Config
		weight   int64
		interval time.Duration
	}{
		{"10 requests a second", Config{Rate: 10, MaxLength: 100}, 1, 100 * time.Millisecond},
		{"6000 tokens a minute, 50-token requests", Config{TokensPerMinute: 6000, MaxLength: 100}, 50, 500 * time.Millisecond},
		{"the slower of both decides", Config{Rate: 10, TokensPerMinute: 6000, MaxLength: 100}, 50, 500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := NewCore(tc.cfg)
			for range 40 {
				if _, err := c.Enqueue(t0, "a", tc.weight); err != nil {
					t.Fatal(err)
				}
			}
			at := drain(t, c, t0, 40)
			for i, got := range at {
				if want := t0.Add(time.Duration(i) * tc.interval); !got.Equal(want) {
					t.Fatalf("admission %d at %v, want %v", i, got.Sub(t0), want.Sub(t0))
				}
			}
		})
	}
}

func TestIdleTimeIsNotSavedForABurst(t *testing.T) {
	c := NewCore(Config{Rate: 10})
	c.Enqueue(t0, "a", 1)
	drain(t, c, t0, 1)
	later := t0.Add(time.Hour)
	for range 3 {
		c.Enqueue(later, "a", 1)
	}
	at := drain(t, c, later, 3)
	if !at[1].Equal(later.Add(100 * time.Millisecond)) {
		t.Fatalf("after an idle hour the second request went at +%v, want +100ms", at[1].Sub(later))
	}
}

// A team that floods its share cannot starve another: the other's wait is
// within one drain interval of what it would be alone.
func TestFloodingTeamDoesNotStarveOthers(t *testing.T) {
	const interval = 100 * time.Millisecond
	for _, arrive := range []time.Duration{0, 250 * time.Millisecond, 3 * time.Second} {
		c := NewCore(Config{Rate: 10, MaxLength: 1000})
		for range 500 {
			c.Enqueue(t0, "flood", 1)
		}
		now := t0
		var bAt time.Time
		var b *Ticket
		for bAt.IsZero() {
			if b == nil && !now.Before(t0.Add(arrive)) {
				var err error
				if b, err = c.Enqueue(now, "quiet", 1); err != nil {
					t.Fatal(err)
				}
			}
			admitted, wake := c.Admit(now)
			for _, x := range admitted {
				if x == b {
					bAt = now
				}
			}
			if b == nil && wake.After(t0.Add(arrive)) {
				wake = t0.Add(arrive) // step to the quiet team's arrival
			}
			now = wake
		}
		// Alone, the quiet team would go at once.
		if wait := bAt.Sub(t0.Add(arrive)); wait > interval {
			t.Fatalf("arriving at +%v behind a flood, the quiet team waited %v (> one interval)", arrive, wait)
		}
	}
}

func TestConcurrencyCap(t *testing.T) {
	c := NewCore(Config{Concurrency: 2})
	for range 5 {
		c.Enqueue(t0, "a", 1)
	}
	if got, _ := c.Admit(t0); len(got) != 2 {
		t.Fatalf("admitted %d, want the cap 2", len(got))
	}
	c.Done()
	if got, _ := c.Admit(t0); len(got) != 1 || c.InFlight() != 2 || c.Len() != 2 {
		t.Fatalf("after one done: admitted %d, in flight %d, waiting %d", len(got), c.InFlight(), c.Len())
	}
}

func TestFullAndCancel(t *testing.T) {
	c := NewCore(Config{Rate: 1, MaxLength: 3})
	var ts []*Ticket
	for range 3 {
		x, err := c.Enqueue(t0, "a", 1)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, x)
	}
	if _, err := c.Enqueue(t0, "b", 1); !errors.Is(err, ErrFull) {
		t.Fatalf("fourth: %v, want ErrFull", err)
	}
	if ra := c.RetryAfter(t0); ra != 4*time.Second {
		t.Fatalf("retry after %v, want 4s (3 waiting + the refused one at 1/s)", ra)
	}
	if !c.Cancel(ts[1]) || c.Len() != 2 {
		t.Fatal("cancel did not remove a waiting ticket")
	}
	at := drain(t, c, t0, 2)
	if !at[1].Equal(t0.Add(time.Second)) {
		t.Fatalf("the cancelled ticket's slot was not given on: %v", at)
	}
	if c.Cancel(ts[0]) {
		t.Fatal("an admitted ticket was cancelled")
	}
}

func TestQueueWaitsReleasesAndTimesOut(t *testing.T) {
	clock := testkit.NewClock(t0)
	q := New(Config{Rate: 10, MaxWait: time.Second}, clock, nil)
	done, _, err := q.Wait(context.Background(), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	done()
	done() // twice is once

	// The next waits for its slot, 100 ms later.
	got := make(chan error, 1)
	go func() {
		d, _, err := q.Wait(context.Background(), "a", 1)
		if d != nil {
			d()
		}
		got <- err
	}()
	waitFor(t, func() bool { return q.Len() == 1 })
	clock.Advance(100 * time.Millisecond)
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// A client that goes away leaves the queue.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _, err := q.Wait(ctx, "b", 1)
		got <- err
	}()
	waitFor(t, func() bool { return q.Len() == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || q.Len() != 0 {
		t.Fatalf("cancelled: %v, %d waiting", err, q.Len())
	}

	// One that waits past MaxWait is refused with a retry hint.
	slow := New(Config{Concurrency: 1, MaxWait: time.Second}, clock, nil)
	hold, _, _ := slow.Wait(context.Background(), "a", 1)
	type result struct {
		ra  time.Duration
		err error
	}
	res := make(chan result, 1)
	go func() {
		_, ra, err := slow.Wait(context.Background(), "a", 1)
		res <- result{ra, err}
	}()
	waitFor(t, func() bool { return slow.Len() == 1 })
	clock.Advance(time.Second)
	r := <-res
	if !errors.Is(r.err, ErrDeadline) || r.ra <= 0 || slow.Len() != 0 {
		t.Fatalf("past its deadline: %v (retry after %v), %d waiting", r.err, r.ra, slow.Len())
	}
	hold()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !testkit.WaitFor(5*time.Second, cond) {
		t.Fatal("condition not reached")
	}
}

package breaker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// gobreaker keeps its own wall-clock time for the open period, so this test
// uses a short real one rather than editing its private fields.
func TestOpensHalfOpensAndCloses(t *testing.T) {
	var mu sync.Mutex
	var changes []string
	b := New("u", Settings{Failures: 3, OpenFor: 200 * time.Millisecond}, func(from, to string) {
		mu.Lock()
		changes = append(changes, from+">"+to)
		mu.Unlock()
	}, nil)
	fail := func() {
		t.Helper()
		done, _, err := b.Allow()
		if err != nil {
			t.Fatalf("refused while closed: %v", err)
		}
		done(ErrFailed)
	}
	for range 2 {
		fail()
	}
	// A client cancellation in between neither trips nor resets it.
	done, _, _ := b.Allow()
	done(context.Canceled)
	fail()
	if b.State() != "open" {
		t.Fatalf("state %s after 3 failures", b.State())
	}
	if _, ra, err := b.Allow(); !errors.Is(err, ErrOpen) || ra <= 0 || ra > 200*time.Millisecond {
		t.Fatalf("open: %v, retry after %v (want the time left until half-open)", err, ra)
	}
	time.Sleep(250 * time.Millisecond)
	done, _, err := b.Allow()
	if err != nil || b.State() != "half-open" {
		t.Fatalf("after its timeout: %v, state %s", err, b.State())
	}
	if _, _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("a second probe while half-open: %v", err)
	}
	done(nil)
	if b.State() != "closed" {
		t.Fatalf("after a good probe: %s", b.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed>open", "open>half-open", "half-open>closed"}
	if len(changes) != 3 || changes[0] != want[0] || changes[1] != want[1] || changes[2] != want[2] {
		t.Fatalf("transitions %v, want %v", changes, want)
	}
}

func TestClientCancellationsNeverTrip(t *testing.T) {
	b := New("u", Settings{Failures: 2}, nil, nil)
	for range 100 {
		done, _, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(context.Canceled)
	}
	if b.State() != "closed" {
		t.Fatalf("state %s", b.State())
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	c := testkit.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	b := New("u", Settings{}, nil, c.Now)
	b.Backoff(20 * time.Second)
	if _, ra, err := b.Allow(); !errors.Is(err, ErrBackoff) || ra != 20*time.Second {
		t.Fatalf("%v %v", err, ra)
	}
	c.Advance(20 * time.Second)
	if done, _, err := b.Allow(); err != nil {
		t.Fatal(err)
	} else {
		done(nil)
	}
}

package gateway

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type deadlineKey struct{}

// TestLazyDeadline: the settlement's context behaves as
// context.WithDeadline(context.WithoutCancel(parent)) does — values, deadline, Done closed at the
// deadline or on release, children cancelled with it — and makes no timer
// until something waits on it.
func TestLazyDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), deadlineKey{}, "v")

	t.Run("unused", func(t *testing.T) {
		ctx, stop := detachedDeadline(parent, time.Now().Add(time.Hour), new(lazyDeadline))
		c := ctx.(*lazyDeadline)
		if ctx.Value(deadlineKey{}) != "v" || ctx.Err() != nil {
			t.Fatalf("value %v, err %v", ctx.Value(deadlineKey{}), ctx.Err())
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Fatalf("deadline %v %v", d, ok)
		}
		if c.loaded() != nil {
			t.Fatal("a timer was made for a context nothing waited on")
		}
		stop()
		wantEnded(t, ctx, context.Canceled)
	})

	t.Run("expires", func(t *testing.T) {
		ctx, stop := detachedDeadline(parent, time.Now().Add(20*time.Millisecond), new(lazyDeadline))
		defer stop()
		child, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the child outlived its parent's deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("errs %v, %v", ctx.Err(), child.Err())
		}
		if child.Value(deadlineKey{}) != "v" {
			t.Fatal("child lost the value")
		}
	})

	t.Run("passed without a wait", func(t *testing.T) {
		ctx, stop := detachedDeadline(parent, time.Now().Add(-time.Second), new(lazyDeadline))
		defer stop()
		wantEnded(t, ctx, context.DeadlineExceeded)
	})

	t.Run("children hang under it", func(t *testing.T) {
		// As under context.WithDeadline: no goroutine per child (context
		// starts one for a parent it cannot find its cancelCtx in).
		ctx, stop := detachedDeadline(parent, time.Now().Add(time.Hour), new(lazyDeadline))
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		for range 100 {
			_, cancel := context.WithTimeout(ctx, time.Minute)
			cancels = append(cancels, cancel)
		}
		if n := runtime.NumGoroutine() - before; n >= 50 {
			t.Fatalf("%d goroutines for 100 children", n)
		}
		stop()
		for _, cancel := range cancels {
			cancel()
		}
	})

	t.Run("released with a child", func(t *testing.T) {
		ctx, stop := detachedDeadline(parent, time.Now().Add(time.Hour), new(lazyDeadline))
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		stop()
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the child outlived its parent's release")
		}
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("child err %v", child.Err())
		}
	})

	t.Run("parent cancelled", func(t *testing.T) {
		// Detached: the settlement outlives the client.
		p, cancelParent := context.WithCancel(parent)
		ctx, stop := detachedDeadline(p, time.Now().Add(time.Hour), new(lazyDeadline))
		defer stop()
		cancelParent()
		if ctx.Err() != nil {
			t.Fatalf("err %v after the parent was cancelled", ctx.Err())
		}
		select {
		case <-ctx.Done():
			t.Fatal("Done closed with the parent")
		default:
		}
		if ctx.Value(deadlineKey{}) != "v" {
			t.Fatal("lost the parent's value")
		}
	})
}

// wantEnded fails t unless ctx's Err is want and its Done is closed.
func wantEnded(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	if !errors.Is(ctx.Err(), want) {
		t.Fatalf("err %v, want %v", ctx.Err(), want)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatalf("Err is %v while Done is open", ctx.Err())
	}
}

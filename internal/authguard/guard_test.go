package authguard_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/internal/authguard"
)

func TestGuardLocksAfterTheLimit(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	engine := budget.NewEngine(store, 0)
	ctx := context.Background()
	l := authguard.Policy{Failures: 3, Window: time.Minute}
	now := time.Now()
	for i := range 3 {
		if _, locked := authguard.New(engine).Locked(ctx, l, "198.51.100.1", now); locked {
			t.Fatalf("locked after %d failures", i)
		}
		if _, locked := authguard.New(engine).Failed(ctx, l, "198.51.100.1", now); locked {
			t.Fatalf("failure %d locked", i+1)
		}
	}
	// Another guard on the same store — another instance — sees the lock.
	other := authguard.New(engine)
	wait, locked := other.Locked(ctx, l, "198.51.100.1", now)
	if !locked || wait <= 0 || wait > time.Minute {
		t.Fatalf("after 3 failures: locked %v for %v", locked, wait)
	}
	if _, locked := other.Locked(ctx, l, "198.51.100.2", now); locked {
		t.Fatal("another address is locked")
	}
	if _, locked := other.Failed(ctx, l, "198.51.100.1", now); !locked {
		t.Fatal("a failure past the limit is not refused")
	}
	if _, locked := authguard.New(engine).Locked(ctx, authguard.Policy{Window: time.Minute}, "198.51.100.1", now); locked {
		t.Fatal("a limit of 0 is off, yet locks")
	}
}

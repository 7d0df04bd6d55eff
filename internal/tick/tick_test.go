package tick_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tick"
)

// f runs again and again, and Every returns once the context is done.
func TestEveryRunsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick.Every(ctx, time.Millisecond, func(context.Context) {
			select {
			case calls <- struct{}{}:
			default:
			}
		})
	}()
	for range 3 {
		<-calls
	}
	cancel()
	<-done
}

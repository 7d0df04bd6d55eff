// Package tick is the loop every background task of the gateway runs: a
// function on a ticker until its context is done.
package tick

import (
	"context"
	"time"
)

// Every calls f every interval until ctx is done (not at once: the first
// call is one interval in).
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

package gateway

import (
	"context"
	"sync"
	"time"
)

// lazyDeadline is a context with its parent's values, none of its
// cancellation, and a deadline whose timer is made only when something
// asks for its Done channel (or its Err past the deadline): it is then
// the context.WithDeadline(context.WithoutCancel(parent)) it stands for.
// The settlement runs under one at every request — it outlives the client
// — and on the embedded store nothing waits on it: WithoutCancel and
// WithTimeout there cost a timer, a channel and four allocations a
// request for nothing. A child made from it (the Redis store's own
// timeouts) asks for Done first, and so hangs under the real one as it
// would have.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	mu      sync.Mutex
	real    context.Context // nil until asked for
	cancel  context.CancelFunc
	stopped bool
}

// detachedDeadline returns ctx's values, detached from its cancellation,
// with deadline d, and the function that releases it, as
// context.WithDeadline(context.WithoutCancel(ctx), d) does. It is made in
// c, which must be unused.
func detachedDeadline(ctx context.Context, d time.Time, c *lazyDeadline) (context.Context, func()) {
	c.parent, c.deadline = ctx, d
	return c, c.stop
}

func (c *lazyDeadline) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.cancel = context.WithDeadline(context.WithoutCancel(c.parent), c.deadline)
		if c.stopped {
			c.cancel()
		}
	}
	return c.real
}

func (c *lazyDeadline) loaded() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real
}

func (c *lazyDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *lazyDeadline) Done() <-chan struct{} { return c.made().Done() }

func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	r, stopped := c.real, c.stopped
	c.mu.Unlock()
	switch {
	case r != nil:
		return r.Err()
	case stopped, !time.Now().Before(c.deadline):
		return c.made().Err()
	}
	return nil
}

// Value is the parent's; once the real context is made, its own (the
// same values, and the key context uses to find the cancelCtx a child
// hangs under).
func (c *lazyDeadline) Value(key any) any {
	if r := c.loaded(); r != nil {
		return r.Value(key)
	}
	return c.parent.Value(key)
}

func (c *lazyDeadline) stop() {
	c.mu.Lock()
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Package authguard locks out client addresses that fail authentication
// too often, for the gateway's API keys and the admin API's tokens alike.
// The count of failures per address is a counter in the budget store
// (budget.Claims: one window per address, from its first failure), so
// every instance sees the same count; each
// instance keeps what it last read for Fresh, so an allowed request does
// not cost a store round trip.
//
// It must not import HTTP frameworks: callers pass the client's address.
package authguard

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// Fresh is how long an instance trusts what it last read of an address's
// count: a lockout reached through other instances takes effect here within
// Fresh at most (at once on this instance's next failure from it).
const Fresh = 500 * time.Millisecond

// maxTracked bounds the addresses remembered; past it, stale ones go.
const maxTracked = 100_000

// Guard decides whether an address may authenticate. The zero value is
// not usable; call New. It is safe for concurrent use.
type Guard struct {
	engine *budget.Engine
	mu     sync.Mutex
	seen   map[string]state
}

type state struct {
	read  time.Time // when the count was read (or the lockout seen)
	until time.Time // locked until; zero when not locked
}

// New returns a guard counting failures in engine's store.
func New(engine *budget.Engine) *Guard {
	return &Guard{engine: engine, seen: map[string]state{}}
}

// Name is the guard's name in metrics and logs.
const Name = "auth-failures"

// partition keeps the counters apart from every org's budgets.
const partition = "_auth"

// Policy is how many failed authentications an address may make in a
// window before it is locked out until the window ends. Failures 0 turns
// the guard off.
type Policy struct {
	Failures int64
	Window   time.Duration
}

func counter(ip string) string { return "authfail:" + ip }

// Locked reports whether ip is locked out under p, and for how long. It
// asks the store at most once per Fresh per address; if the store cannot
// answer, the address is not locked (the request meets the store again on
// its way and fails closed there).
func (g *Guard) Locked(ctx context.Context, p Policy, ip string, now time.Time) (time.Duration, bool) {
	if p.Failures <= 0 {
		return 0, false
	}
	g.mu.Lock()
	st, ok := g.seen[ip]
	g.mu.Unlock()
	if ok && now.Sub(st.read) < Fresh {
		return st.until.Sub(now), st.until.After(now)
	}
	n, left, err := g.engine.Count(ctx, partition, counter(ip), 0, p.Window)
	if err != nil {
		return 0, false
	}
	st = state{read: now}
	if n >= p.Failures {
		st.until = now.Add(max(left, time.Second))
	}
	g.remember(ip, st)
	return st.until.Sub(now), st.until.After(now)
}

// Failed counts one failed authentication from ip; past the policy's
// failures the address is locked out, and the wait is returned.
func (g *Guard) Failed(ctx context.Context, p Policy, ip string, now time.Time) (time.Duration, bool) {
	if p.Failures <= 0 {
		return 0, false
	}
	n, left, err := g.engine.Count(ctx, partition, counter(ip), 1, p.Window)
	switch {
	case err != nil:
	case n > p.Failures:
		wait := max(left, time.Second)
		g.remember(ip, state{read: now, until: now.Add(wait)})
		return wait, true
	default:
		g.mu.Lock()
		delete(g.seen, ip) // the count moved: read it again next time
		g.mu.Unlock()
	}
	return 0, false
}

func (g *Guard) remember(ip string, st state) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.seen) >= maxTracked {
		for k, v := range g.seen {
			if st.read.Sub(v.read) >= Fresh && !v.until.After(st.read) {
				delete(g.seen, k)
			}
		}
	}
	if len(g.seen) < maxTracked {
		g.seen[ip] = st
	}
}

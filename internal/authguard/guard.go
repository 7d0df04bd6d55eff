// Package authguard locks out client addresses that fail authentication
// too often, for the gateway's API keys and the admin API's tokens alike.
// The count of failures per address lives in the budget store (one fixed
// window per address), so every instance sees the same count; each
// instance keeps what it last read for Fresh, so an allowed request does
// not cost a store round trip.
//
// It must not import HTTP frameworks: callers pass the client's address.
package authguard

import (
	"context"
	"errors"
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

// Limit is the failure limit of one address: limit failures a window.
// An Amount of 0 turns the guard off.
func Limit(limit int64, window time.Duration) budget.Limit {
	return budget.Limit{Name: "auth-failures", Partition: "_auth", Scope: budget.ScopeKey, Kind: budget.Rate,
		Unit: budget.Requests, Amount: limit, Window: window, Algorithm: budget.FixedWindow}
}

func bucket(l budget.Limit, ip string) budget.Limit {
	l.Bucket = "authfail:" + ip
	return l
}

// Locked reports whether ip is locked out under l, and for how long. It
// asks the store at most once per Fresh per address; if the store cannot
// answer, the address is not locked (the request meets the store again on
// its way and fails closed there).
func (g *Guard) Locked(ctx context.Context, l budget.Limit, ip string, now time.Time) (time.Duration, bool) {
	if l.Amount <= 0 {
		return 0, false
	}
	g.mu.Lock()
	st, ok := g.seen[ip]
	g.mu.Unlock()
	if ok && now.Sub(st.read) < Fresh {
		return st.until.Sub(now), st.until.After(now)
	}
	peek, err := g.engine.Peek(ctx, []budget.Limit{bucket(l, ip)})
	if err != nil || len(peek) != 1 {
		return 0, false
	}
	st = state{read: now}
	if peek[0].Remaining <= 0 {
		st.until = now.Add(max(peek[0].ResetAfter, time.Second))
	}
	g.remember(ip, st)
	return st.until.Sub(now), st.until.After(now)
}

// Failed counts one failed authentication from ip; past the limit the
// address is locked out, and the wait is returned.
func (g *Guard) Failed(ctx context.Context, l budget.Limit, ip string, now time.Time) (time.Duration, bool) {
	if l.Amount <= 0 {
		return 0, false
	}
	r, _, err := g.engine.Reserve(ctx, []budget.Limit{bucket(l, ip)}, budget.Amounts{Requests: 1})
	var refused *budget.RefusedError
	switch {
	case errors.As(err, &refused):
		wait := max(refused.RetryAfter(), time.Second)
		g.remember(ip, state{read: now, until: now.Add(wait)})
		return wait, true
	case err == nil:
		_, _ = g.engine.Settle(context.WithoutCancel(ctx), r, budget.Amounts{Requests: 1})
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

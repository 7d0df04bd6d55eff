package gateway

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// estimateAt is the request's estimate with an output cap of k per
// choice (0: each preparation's own), at the dearest deployment that may
// serve it: the most it may cost and the most tokens it may take there.
func (cl *Call) estimateAt(k int64) (budget.Amounts, error) {
	a := budget.Amounts{Requests: cl.settings.cost(cl.req.Route)}
	for _, p := range cl.plans {
		c, tokens, err := p.prep.Cost(p.price, k)
		if err != nil {
			return budget.Amounts{}, err
		}
		a.Cost, a.Tokens = max(a.Cost, c), max(a.Tokens, tokens)
	}
	return a, nil
}

// fit is the largest output cap per choice, below the request's own, with
// which every limit would admit the request as the store found them in
// res (a refusal); 0 when none would, -1 when the request has no output
// cap (embeddings).
func (cl *Call) fit(res budget.Result) int64 {
	if len(cl.plans) == 0 || cl.plans[0].prep.Choices == 0 || len(res.Status) != len(cl.limits) {
		return -1
	}
	var capMax int64
	for _, p := range cl.plans {
		capMax = max(capMax, p.prep.OutputCap)
	}
	return bound.Fit(capMax, func(k int64) bool {
		a, err := cl.estimateAt(k)
		if err != nil {
			return false
		}
		for i, l := range cl.limits {
			if !l.Enforced() {
				continue
			}
			need := a.Of(l.Unit)
			if l.Kind == budget.Concurrency {
				need = 1
			}
			if need > res.Status[i].Remaining {
				return false
			}
		}
		return true
	})
}

// clamp rewrites the request, for every deployment, to an output cap of
// at most k per choice and re-estimates it.
func (cl *Call) clamp(k int64) error {
	done := map[*bound.Prepared]bool{}
	for _, p := range cl.plans {
		if done[p.prep] || k >= p.prep.OutputCap {
			continue
		}
		done[p.prep] = true
		if err := p.prep.Clamp(k); err != nil {
			return err
		}
	}
	est, err := cl.estimateAt(0)
	if err != nil {
		return err
	}
	cl.estimate = est
	return nil
}

// holdTimer keeps a moving average of how long reservations stay open,
// from reservation to settlement: how soon a budget held by requests in
// flight can be expected back.
type holdTimer struct{ avg atomic.Int64 } // nanoseconds

// observe folds one reservation's lifetime in (weight 1/8).
func (h *holdTimer) observe(d time.Duration) {
	for {
		old := h.avg.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if h.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// retry is when a held budget is worth asking again: the average
// reservation's lifetime, between 1 s and a minute; budget.HeldRetry
// before any was seen.
func (h *holdTimer) retry() time.Duration {
	d := time.Duration(h.avg.Load())
	if d <= 0 {
		return budget.HeldRetry
	}
	return min(max(d, time.Second), time.Minute)
}

// clampable is the output cap a refused request may be clamped to, or 0:
// its deciding budget clamps, and at least its minimum fits now. On success
// the request is already rewritten and re-estimated.
func (g *Gateway) clampable(cl *Call, refused *budget.RefusedError) int64 {
	if refused.Limit.ClampMin <= 0 || !(errors.Is(refused, budget.ErrOverBudget) || errors.Is(refused, budget.ErrHeld)) {
		return 0
	}
	k := cl.fit(refused.Result)
	if k < refused.Limit.ClampMin || cl.clamp(k) != nil {
		return 0
	}
	return k
}

// refusalOf is a limit's refusal of cl, with what the sequence knows: the
// estimate in the deciding limit's unit, the cap that would fit, and for
// a held budget when it is expected back (how long reservations stay
// open here).
func (g *Gateway) refusalOf(cl *Call, refused *budget.RefusedError) *Refused {
	r := &Refused{RefusedError: refused, Estimate: cl.estimate.Of(refused.Limit.Unit), Fit: -1, Limits: cl.limits}
	if cl.principal.Key != "" {
		g.refusedKeys.Add(cl.principal.Org + "/" + cl.principal.Key)
	}
	if refused.Limit.Kind == budget.Concurrency {
		r.Estimate = 1
	}
	if errors.Is(refused, budget.ErrHeld) {
		refused.Result.RetryAfter = g.holds.retry()
	}
	if budget.IsBudgetRefusal(refused) && len(cl.plans) > 0 { // a paid route has no output cap
		r.Fit, r.CapField = cl.fit(refused.Result), cl.plans[0].prep.CapField
	}
	return r
}

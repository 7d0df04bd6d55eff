package gateway

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// Forward is the sequence's second step: it sends an admitted call to its
// upstream and writes the answer to w as it arrives. An LLM call goes to
// the first candidate upstream that takes it — its breaker closed, its
// queue admitting it —; a paid call to its route's API. The error is one
// the client is answered with when nothing was written yet (an
// *UpstreamRefused, ErrUpstream, ErrUpstreamTimeout, ErrClientCanceled);
// what was served is kept for Finish.
func (g *Gateway) Forward(ctx context.Context, cl *Call, w http.ResponseWriter) error {
	var err error
	if cl.paid != nil {
		cl.units, cl.reported, cl.ok, err = g.forwardPaid(ctx, cl, w)
	} else {
		cl.usage, cl.ok, err = g.forward(ctx, cl, w)
	}
	cl.outcome = outcomeOf(cl.ok, err)
	if cl.drained {
		cl.outcome = "client_closed" // served to no one, read all the same
	}
	return err
}

// outcomeOf names how the upstream exchange ended, for the metrics.
func outcomeOf(served bool, err error) string {
	switch {
	case served:
		return "served"
	case errors.Is(err, ErrClientCanceled):
		return "client_closed"
	case IsUpstreamRefused(err), isRefused(err):
		return "refused"
	}
	return "upstream_error"
}

// isRefused says whether err is a limit's refusal (of a failover's next
// attempt).
func isRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r)
}

// IsUpstreamRefused says whether err is an *UpstreamRefused. Apart: the
// variable errors.As is given lives on the heap, and where it is declared
// it is made, on every path.
func IsUpstreamRefused(err error) bool {
	var upErr *UpstreamRefused
	return errors.As(err, &upErr)
}

// forward sends the request to its deployments in the route's order
// until one serves it: one whose breaker is closed and whose queue admits
// it, and that answers. A connection error, a timeout before the answer's
// headers, a 5xx or a 429 — before any byte reached the client — sends it
// on to the next deployment; the last one's answer is relayed whatever it
// is. served is false when no deployment served the request (refusals,
// error statuses, no answer); usage is then meaningless, unless the
// attempt is charged its reservation (Call.chargeReserved).
//
// An attempt given up with no answer after its request may have reached
// the upstream (a first-byte timeout, a connection lost) may be billed:
// it keeps its reservation, charged in Finish, and the next deployment's
// attempt is reserved anew before it is sent — refused if it does not fit.
func (g *Gateway) forward(ctx context.Context, cl *Call, w http.ResponseWriter) (u budget.Usage, served bool, err error) {
	var refused UpstreamRefused // copied to the heap only when returned
	order := cl.inOrder()
	skipped := ""
	var failed *failure // the last failure not relayed, relayed if no other deployment serves
	for i, p := range order {
		t := p.dep.target
		done, ra, err := t.breaker.Allow()
		if err != nil {
			refused.note(map[bool]string{true: "upstream_backing_off", false: "upstream_circuit_open"}[errors.Is(err, breaker.ErrBackoff)], ra)
			skipped = t.name
			continue
		}
		qctx, qend := g.span(ctx, "queue", attribute.String("upstream", t.name))
		release, err := g.queued(qctx, cl, t, &refused)
		qend(err)
		if err != nil {
			done(context.Canceled) // not the upstream's doing
			if ctx.Err() != nil {
				return u, false, ErrClientCanceled
			}
			skipped = t.name
			continue
		}
		if skipped != "" {
			g.metrics.Fallbacks.WithLabelValues(skipped, t.name).Inc()
		}
		t.inflight.Add(1)
		uctx, uend := g.span(ctx, "upstream", attribute.String("upstream", t.name), attribute.String("deployment", p.dep.name()))
		a := g.send(uctx, cl, p)
		if a.retryable() && i < len(order)-1 && ctx.Err() == nil {
			// Nothing reached the client: the next deployment may serve it.
			failed = a.fail(p)
			uend(failed)
			t.inflight.Add(-1)
			release()
			done(breaker.ErrFailed)
			g.log.Warn("deployment failed; trying the next", "request_id", cl.id, "deployment", p.dep.name(), "err", failed)
			if a.forwarded {
				if err := g.reserveAgain(ctx, cl, p, a); err != nil {
					return u, false, err
				}
			}
			skipped = t.name
			continue
		}
		cl.served = p
		u, served, fail, err := g.relay(uctx, cl, p, a, w)
		uend(err)
		t.inflight.Add(-1)
		release()
		done(fail)
		return u, served, err
	}
	if failed != nil {
		return u, false, failed.relay(w)
	}
	g.log.Warn("no upstream took the request", "request_id", cl.id, "model", cl.model, "reason", refused.Code)
	out := refused
	return u, false, &out
}

// reserveAgain keeps cl's reservation for its attempt at p, abandoned
// after its request may have reached the upstream, and reserves the
// request again for the next attempt. A refusal says the first attempt is
// charged.
func (g *Gateway) reserveAgain(ctx context.Context, cl *Call, p *plan, a *attempt) error {
	ab := abandonedAttempt{plan: p, cause: cmp.Or(a.x.why(), causeConnection), held: cl.held(), estimate: cl.estimate}
	cl.earlier = append(cl.earlier, ab)
	res, err := g.reserve(ctx, cl)
	if err != nil {
		cl.reservation, cl.retryRefused = nil, true
		var r *Refused
		if errors.As(err, &r) {
			r.After = p.dep.target.name
		}
		return err
	}
	g.admitted(ctx, cl, res)
	return nil
}

// inOrder is cl's plans in the order of its route's strategy.
func (cl *Call) inOrder() []*plan {
	if len(cl.plans) == 1 {
		return cl.plans // one deployment: nothing to order
	}
	order := make([]*plan, 0, len(cl.plans))
	for _, d := range cl.route.order(cl.intn) {
		if i := slices.IndexFunc(cl.plans, func(p *plan) bool { return p.dep == d }); i >= 0 {
			order = append(order, cl.plans[i])
		}
	}
	return order
}

// queued waits for t's queue, if it has one; on a refusal the reason is
// noted in refused and the error returned.
func (g *Gateway) queued(ctx context.Context, cl *Call, t *target, refused *UpstreamRefused) (release func(), err error) {
	if t.queue == nil {
		return func() {}, nil
	}
	start := g.now()
	s := t.series
	s.QueueDepth.Set(float64(t.queue.Len() + 1))
	rel, ra, err := t.queue.Wait(ctx, cl.principal.Team, cl.estimate.Tokens)
	s.QueueDepth.Set(float64(t.queue.Len()))
	result := "admitted"
	switch {
	case errors.Is(err, queue.ErrFull):
		result = "full"
	case errors.Is(err, queue.ErrDeadline):
		result = "timeout"
	case err != nil:
		result = "cancelled"
	}
	s.QueueWait[result].Observe(g.now().Sub(start).Seconds())
	if err != nil {
		refused.note(map[bool]string{true: "upstream_queue_full", false: "upstream_queue_timeout"}[errors.Is(err, queue.ErrFull)], ra)
		return nil, err
	}
	return rel, nil
}

// note keeps the refusal that lets the client retry soonest.
func (e *UpstreamRefused) note(code string, ra time.Duration) {
	if e.Code == "" || ra < e.RetryAfter {
		e.Code, e.RetryAfter = code, ra
	}
}

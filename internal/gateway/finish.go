package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/jsonlog"
	"github.com/tollgate-dev/tollgate/internal/metrics"
)

// Finish is the sequence's last step: it settles cl's reservation against
// what the upstream reported (nothing when it did not serve the request),
// hands the ledger its entry, fires the alerts the spend crossed and
// records the spend in the metrics. It survives the client going away;
// with Options.SettleAfterResponse it runs on a worker after Finish
// returns, so call it once the response is written.
func (g *Gateway) Finish(ctx context.Context, cl *Call) {
	// finish detaches ctx from the client (detachedDeadline).
	if !g.settleAsync {
		g.finish(ctx, cl)
		return
	}
	g.settling.run(func() { g.finish(ctx, cl) })
}

// Done counts cl by how it ended. Call it once, however far cl got.
func (g *Gateway) Done(cl *Call) {
	g.metrics.Request(metrics.RequestLabels{Route: cl.req.Route, Team: cl.principal.Team, Model: cl.Model(), Outcome: cl.outcome}).Inc()
}

func (g *Gateway) finish(ctx context.Context, cl *Call) {
	ctx, cancel := detachedDeadline(ctx, time.Now().Add(5*time.Second), &cl.settleCtx)
	defer cancel()
	ctx, end := g.span(ctx, "settle")
	defer end(nil)
	if cl.paid != nil {
		g.finishPaid(ctx, cl)
		return
	}
	for i := range cl.earlier {
		g.settleAbandoned(ctx, cl, &cl.earlier[i])
	}
	if cl.retryRefused {
		return
	}
	u, served := cl.usage, cl.ok
	actual := budget.Amounts{}
	if served || cl.chargeReserved {
		cost, err := cl.served.price.Cost(u)
		if cl.chargeReserved {
			cost, err = cl.estimate.Cost, nil
		}
		if err != nil {
			// Usage we cannot price is charged at the reservation: over,
			// never under.
			g.log.Warn("pricing reported usage", "request_id", cl.id, "err", err)
			cost, u.Estimated = cl.estimate.Cost, true
		}
		actual = budget.Amounts{Tokens: u.TotalTokens(), Requests: cl.estimate.Requests, Cost: cost}
	}
	e := cl.entry()
	e.Usage, e.Cost, e.Served, e.Degraded = u, actual.Cost, served, cl.degraded
	e.Settlement, e.Abandoned = cl.settlement(), cl.abandoned
	if cl.abandoned != "" && cl.served != nil {
		g.metrics.AttemptsAbandoned.WithLabelValues(cl.served.dep.target.name, cl.abandoned).Inc()
	}
	e.Upstream = ""
	if cl.served != nil {
		e.Upstream = cl.served.dep.target.name
		if m := cl.served.dep.model.Name; m != cl.model {
			e.ServedModel = m
		}
	}
	outcome := g.settle(ctx, cl, cl.held(), e, actual)
	if served {
		g.observeUsage(cl, u, actual)
	}
	// Field by field: the line is written at every request (see jsonlog.Line).
	l := jsonlog.NewLine(ctx, g.log, slog.LevelInfo, "request")
	l.String("request_id", cl.id)
	l.String("route", cl.req.Route)
	l.String("org", cl.principal.Org)
	l.String("team", cl.principal.Team)
	l.String("key", cl.principal.Key)
	l.String("model", cl.model)
	l.Bool("stream", cl.llm.Stream)
	l.String("reservation", e.ReservationID)
	l.String("outcome", outcome.String())
	l.String("degraded", cl.degraded)
	l.String("bypass", cl.bypass)
	l.Bool("served", served)
	l.Int64("estimate_usd_micros", int64(cl.estimate.Cost))
	l.Int64("actual_usd_micros", int64(actual.Cost))
	l.Int64("input_tokens", u.InputTokens)
	l.Int64("output_tokens", u.OutputTokens)
	l.Bool("usage_estimated", u.Estimated)
	l.Int64("duration_ms", g.now().Sub(cl.start).Milliseconds())
	l.Write(ctx)
}

// settleAbandoned charges an attempt given up before its answer (after
// its request may have reached the upstream, and another deployment was
// tried) its whole reservation, with its own ledger entry.
func (g *Gateway) settleAbandoned(ctx context.Context, cl *Call, ab *abandonedAttempt) {
	g.metrics.AttemptsAbandoned.WithLabelValues(ab.plan.dep.target.name, ab.cause).Inc()
	e := cl.entry()
	e.Time, e.Upstream, e.Cost, e.Reserved, e.ReservedTokens = ab.held.at, ab.plan.dep.target.name, ab.estimate.Cost, ab.estimate.Cost, ab.estimate.Tokens
	e.Usage, e.Served, e.Degraded = ab.plan.prep.Reserved(), false, cl.degraded
	e.Settlement, e.Abandoned = SettledAtReservation, ab.cause
	if m := ab.plan.dep.model.Name; m != cl.model {
		e.ServedModel = m
	}
	g.settle(ctx, cl, ab.held, e, ab.estimate)
	g.log.Warn("upstream attempt abandoned; charged its reservation", "request_id", cl.id, "upstream", e.Upstream,
		"cause", ab.cause, "usd_micros", int64(e.Cost))
}

// settle charges h (cl's reservation, or an abandoned attempt's) the
// actual amounts and hands the ledger its entry e (the reservation's id,
// outcome and, for a settlement that corrected a sweep, the difference
// filled in); spend let through while the store was unavailable is
// recorded for when it answers. It is the one settlement step of LLM and
// paid routes.
func (g *Gateway) settle(ctx context.Context, cl *Call, h held, e *budget.Entry, actual budget.Amounts) budget.Outcome {
	var outcome budget.Outcome
	if h.r != nil {
		start := g.now()
		g.holds.observe(start.Sub(h.at))
		e.ReservationID = h.r.ID
		var err error
		outcome, err = h.engine.SettleEntry(ctx, h.r, actual, e)
		g.metrics.SettleLatency.Observe(g.now().Sub(start).Seconds())
		if err != nil {
			g.metrics.StoreErrors.WithLabelValues("settle").Inc()
			g.log.Error("settling", "request_id", cl.id, "reservation", e.ReservationID, "err", err)
		}
	}
	if outcome == budget.Settled || outcome == budget.Corrected {
		g.alerts.settled(ctx, cl, actual)
	}
	if h.r != nil {
		g.overrun(ctx, cl, e, actual)
	}
	if cl.degraded != "" && e.Served {
		// Spend made while the store was away is charged to it when it
		// answers again (the store spools it until then), with its ledger
		// entry, to the periods in force now.
		e.Time = g.now()
		if err := g.engine.RecordUnreserved(ctx, cl.limits, actual, e); err != nil {
			g.log.Error("recording spend made while the store was unavailable", "request_id", cl.id, "err", err)
		}
	}
	e.Outcome = outcome.String()
	if outcome == budget.Corrected {
		// The ledger has the sweep's entry, charged at the reservation:
		// this one carries the difference.
		*e = budget.CorrectionOf(*e)
	}
	if f := g.ledger.Load(); f != nil {
		(*f)(*e)
	}
	return outcome
}

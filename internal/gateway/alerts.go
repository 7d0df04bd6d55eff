package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
)

// alerter sends soft-threshold alerts: once per threshold per budget per
// period across every instance — the first instance to take a one-shot
// bucket in the budget store sends it — to each webhook, retried with
// backoff.
type alerter struct {
	g          *Gateway
	thresholds []int64
	webhooks   []string
	pending    bool // count reservations in flight as spent
	client     *http.Client

	mu    sync.Mutex
	fired map[string]bool // this instance's memory of alerts already taken (by anyone)

	// The sends in flight, and what ends them at shutdown (StopAlerts).
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// Alert is the webhook body: Slack's "text", plus the figures. Kind is
// "threshold" (a budget reached a share of its ceiling) or "overrun" (a
// request was charged past its reservation; Used is its charge, Limit its
// reservation, RequestID names it).
type Alert struct {
	Kind      string `json:"kind"`
	RequestID string `json:"request_id,omitempty"`
	Text      string `json:"text"`
	Scope     string `json:"scope"`
	Org       string `json:"org"`
	Team      string `json:"team"`
	Budget    string `json:"budget"`
	Period    string `json:"period"`
	Threshold int64  `json:"threshold_percent"`
	Used      int64  `json:"used"`
	Limit     int64  `json:"limit"`
	Unit      string `json:"unit"`
	// Basis is what Used counts: "settled" spend, or "settled_and_pending"
	// (alerts.include_pending).
	Basis string `json:"basis"`
	Key   string `json:"key,omitempty"`
}

// check looks at the budgets a reservation touched and fires the
// thresholds their spend has passed. The store's answer tells each
// budget's settled spend as of this reservation: spend that other requests
// settled (or another instance) shows here.
func (a *alerter) check(ctx context.Context, cl *Call, res budget.Result) {
	if a == nil || len(res.Status) != len(cl.limits) {
		return
	}
	for i := range cl.limits {
		a.crossed(ctx, cl, cl.limits[i], res.Status[i], false)
	}
}

// settled fires the thresholds a settlement's own spend crossed, at once:
// each budget's settled spend is at least what it was at the reservation
// plus this request's actual amount (settledStatus; others may have
// settled meanwhile, and the next reservation sees them). With
// include_pending the reservation's check is the one that counts.
func (a *alerter) settled(ctx context.Context, cl *Call, actual budget.Amounts) {
	if a == nil || a.pending || len(cl.reserved.Status) != len(cl.limits) {
		return
	}
	for i, l := range cl.limits {
		if l.Kind == budget.Ceiling {
			a.crossed(ctx, cl, l, cl.settledStatus(i, actual), false)
		}
	}
}

// refused fires a refused request's budgets: an exhausted one has reached
// 100 %, whatever its settled figure says (finance lowered it, or spend
// from elsewhere settled).
func (a *alerter) refused(ctx context.Context, cl *Call, e *budget.RefusedError) {
	if a == nil || len(e.Result.Status) != len(cl.limits) {
		return
	}
	for i := range cl.limits {
		a.crossed(ctx, cl, cl.limits[i], e.Result.Status[i], i == e.Result.Decider && errors.Is(e, budget.ErrExhausted))
	}
}

// crossed fires every threshold budget l's status s has reached (all of
// them when exhausted).
func (a *alerter) crossed(ctx context.Context, cl *Call, l budget.Limit, s budget.Status, exhausted bool) {
	key, ok := alertable(cl, l)
	if !ok || s.Capacity <= 0 {
		return
	}
	// As it is, past the ceiling too: over 100 % is 100 % crossed.
	used, basis := s.Spent, "settled"
	if a.pending {
		used, basis = s.Used(), "settled_and_pending"
	}
	if exhausted {
		used = max(used, s.Capacity)
	}
	period := budget.PeriodID(l.Period, a.g.now(), l.Location)
	for _, th := range a.thresholds {
		id := policy.AlertID(l, period, th)
		if used*100 < th*s.Capacity {
			// Below a threshold this instance saw fired: the period
			// was reset (which re-arms the store's claim too) or the
			// ceiling raised. Ask the store again at the next crossing.
			a.mu.Lock()
			delete(a.fired, id)
			a.mu.Unlock()
			continue
		}
		if !a.claimOnce(ctx, l, id) {
			continue
		}
		alert := Alert{Kind: "threshold", Scope: l.Scope.String(), Org: cl.principal.Org, Team: cl.principal.Team, Budget: l.Name, Period: period,
			Threshold: th, Used: used, Limit: s.Capacity, Unit: l.Unit.String(), Basis: basis, Key: key}
		owner := ownerOf(cl, key)
		verb := "spent"
		if a.pending {
			verb = "spent or reserved"
		}
		alert.Text = fmt.Sprintf("Tollgate: %s budget %q of %s has reached %d%% for %s (%s of %s %s).",
			alert.Scope, l.Name, owner, th, period, l.Format(used), l.Format(s.Capacity), verb)
		if exhausted {
			alert.Text += " Requests are being refused."
		}
		a.g.metrics.Alerts.WithLabelValues(alert.Scope, alert.Team, l.Name, strconv.FormatInt(th, 10)).Inc()
		a.g.log.Warn("budget threshold reached", "scope", alert.Scope, "team", alert.Team, "budget", l.Name, "threshold", th, "period", period)
		a.send(alert)
	}
}

// blocked fires, once a period, the budget that refused cl for want of
// room when no output cap made it fit (fit 0; -1 on a paid route, whose
// requests have no cap): what is left of it is smaller than such a request
// at its smallest, so the team is refused though no threshold may have
// been reached.
func (a *alerter) blocked(ctx context.Context, cl *Call, e *budget.RefusedError, fit int64) {
	if a == nil || fit > 0 || !errors.Is(e, budget.ErrOverBudget) {
		return
	}
	l, d := e.Limit, e.Result.Decider
	key, ok := alertable(cl, l)
	if !ok || d < 0 || d >= len(e.Result.Status) {
		return
	}
	s := e.Result.Status[d]
	period := budget.PeriodID(l.Period, a.g.now(), l.Location)
	if !a.claimOnce(ctx, l, policy.BlockedAlertID(l, period)) {
		return
	}
	owner := ownerOf(cl, key)
	need := cl.estimate.Of(l.Unit)
	alert := Alert{Kind: "blocked", Scope: l.Scope.String(), Org: cl.principal.Org, Team: cl.principal.Team, Budget: l.Name, Period: period,
		Used: s.Spent, Limit: s.Capacity, Unit: l.Unit.String(), Basis: "settled", Key: key,
		Text: fmt.Sprintf("Tollgate: %s budget %q of %s is blocked for %s: %s of %s is left, less than a request needed at its smallest (%s). Requests like it are being refused.",
			l.Scope, l.Name, owner, period, l.Format(s.Remaining), l.Format(s.Capacity), l.Format(need))}
	if fit == 0 {
		// An LLM request: the estimate includes its output cap; its input
		// alone did not fit.
		alert.Text = fmt.Sprintf("Tollgate: %s budget %q of %s is blocked for %s: %s of %s is left, and a request of %s did not fit with any output cap. Requests like it are being refused.",
			l.Scope, l.Name, owner, period, l.Format(s.Remaining), l.Format(s.Capacity), l.Format(need))
	}
	a.g.metrics.Alerts.WithLabelValues(alert.Scope, alert.Team, l.Name, "blocked").Inc()
	a.g.log.Warn("budget blocked: what is left fits no request", "scope", alert.Scope, "team", alert.Team, "budget", l.Name, "period", period)
	a.send(alert)
}

// alertable tells whether budget l alerts, and the key it names (a key's
// budget): org, team and key budgets do; per-user and per-model ones would
// alert per user and model.
func alertable(cl *Call, l budget.Limit) (key string, ok bool) {
	if l.Kind != budget.Ceiling || l.Shadow {
		return "", false
	}
	switch l.Scope {
	case budget.ScopeOrg, budget.ScopeTeam:
		return "", true
	case budget.ScopeKey:
		return cl.principal.Key, true
	}
	return "", false
}

// ownerOf is whose budget an alert is about, as its text says.
func ownerOf(cl *Call, key string) string {
	owner := cl.principal.Org + "/" + cl.principal.Team
	if key != "" {
		owner += " key " + key
	}
	return owner
}

// claimOnce claims alert id for this instance, once a period across every
// instance, and counts it for the finance page: true if this call is the
// one that sends it.
func (a *alerter) claimOnce(ctx context.Context, l budget.Limit, id string) bool {
	a.mu.Lock()
	done := a.fired[id]
	a.fired[id] = true
	a.mu.Unlock()
	if done || !a.take(ctx, l, id) {
		return false
	}
	if _, _, err := a.g.engine.Count(context.WithoutCancel(ctx), l.Partition, policy.AlertFired(id), 1, policy.AlertClaimTTL(l, a.g.now())); err != nil {
		a.g.log.Warn("counting a fired alert for the finance page", "err", err) // the alert still goes out
	}
	return true
}

// take claims an alert for this instance: a claim in the store that
// stands for the period; every other instance is refused it.
func (a *alerter) take(ctx context.Context, l budget.Limit, id string) bool {
	took, err := a.g.engine.Claim(context.WithoutCancel(ctx), l.Partition, policy.AlertClaim(id), policy.AlertClaimTTL(l, a.g.now()))
	if err != nil {
		a.mu.Lock()
		delete(a.fired, id) // the store did not answer: try again next time
		a.mu.Unlock()
		return false
	}
	return took
}

// send posts the alert to every webhook, retrying each up to five times
// (1 s, 2 s, 4 s, 8 s apart), until StopAlerts ends it.
func (a *alerter) send(alert Alert) {
	body, _ := json.Marshal(alert)
	for _, url := range a.webhooks {
		a.wg.Go(func() {
			for attempt := range 5 {
				if attempt > 0 {
					t := time.NewTimer(time.Second << (attempt - 1))
					select {
					case <-a.ctx.Done():
						t.Stop()
						a.g.log.Error("alert webhook not reached before shutdown", "attempts", attempt, "text", alert.Text)
						return
					case <-t.C:
					}
				}
				req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					a.g.log.Error("alert webhook", "err", err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := a.client.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode < 300 {
						return
					}
				}
				a.g.log.Warn("alert webhook failed; retrying", "attempt", attempt+1, "err", err)
			}
			a.g.log.Error("alert webhook failed five times; giving up", "text", alert.Text)
		})
	}
}

// StopAlerts lets the alerts being sent finish for up to grace, then ends
// those still retrying (each logged). Call it at shutdown, after the last
// settlement.
func (g *Gateway) StopAlerts(grace time.Duration) {
	a := g.alerts
	if a == nil {
		return
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	a.cancel()
	<-done
}

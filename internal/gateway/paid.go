package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/policy"
)

// paidRoute is a generic paid HTTP API behind a path prefix.
type paidRoute struct {
	cfg config.PaidRoute
	rt  http.RoundTripper
	// max is what one call can cost: the reservation.
	max budget.Money
}

// newPaidRoute builds the route r, on rt (nil: a transport of its own).
func newPaidRoute(r config.PaidRoute, rt http.RoundTripper) (*paidRoute, error) {
	hi, lo := bits.Mul64(uint64(r.PerUnit.Value), uint64(r.MaxUnits))
	if hi != 0 || lo > 1<<62 {
		return nil, errors.New("gateway: paid route " + r.Name + ": per_unit × max_units overflows")
	}
	if rt == nil {
		rt = newTransport(10 * time.Second) // the call's context has r.Timeout
	}
	return &paidRoute{
		cfg: r,
		rt:  rt,
		max: budget.Money(r.PerRequest.Value + int64(lo)),
	}, nil
}

// cost prices a call that used units; a call that reported none is charged
// the maximum, as estimated.
func (p *paidRoute) cost(units int64, reported bool) (budget.Money, bool) {
	if p.cfg.PerUnit.Value == 0 {
		return budget.Money(p.cfg.PerRequest.Value), false
	}
	if !reported || units < 0 || units > 1<<40 {
		return p.max, true
	}
	return budget.Money(p.cfg.PerRequest.Value + p.cfg.PerUnit.Value*units), false
}

// AdmitPaid is Admit for the paid route name: the call is estimated at
// the route's maximum (per request + per unit × max units), forwarded as
// it is, and priced from the units the answer reports.
func (g *Gateway) AdmitPaid(ctx context.Context, name string, req Request) (*Call, error) {
	cl := g.begin(req)
	p := cl.settings.paid[name]
	cl.paid, cl.model, cl.upstream = p, name, name
	body, err := req.Body()
	if err != nil {
		cl.outcome = "refused"
		return cl, err
	}
	cl.body = body
	cl.limits = cl.principal.Limits(policy.RequestKey{User: cl.user, Model: name, Route: req.Route, ID: cl.id, IP: req.IP})
	cl.estimate = budget.Amounts{Requests: cl.settings.cost(req.Route), Cost: p.max}
	return cl, g.admit(ctx, cl, body)
}

// finishPaid settles a paid call: the units it reported at the route's
// prices, the maximum when it reported none, nothing when not served.
func (g *Gateway) finishPaid(ctx context.Context, cl *Call) {
	p := cl.paid
	actual := budget.Amounts{}
	cost, estimated := p.cost(cl.units, cl.reported)
	if cl.ok {
		actual = budget.Amounts{Requests: cl.estimate.Requests, Cost: cost}
		g.metrics.SpendMicros.WithLabelValues(cl.principal.Team, cl.model).Add(float64(actual.Cost))
	}
	e := cl.entry()
	e.Usage.Estimated, e.Cost, e.Served, e.Degraded = estimated && cl.ok, actual.Cost, cl.ok, cl.degraded
	outcome := g.settle(ctx, cl, cl.held(), e, actual)
	g.log.Info("request", "request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team, "key", cl.principal.Key,
		"route", p.cfg.Prefix, "reservation", e.ReservationID, "outcome", outcome.String(), "degraded", cl.degraded, "bypass", cl.bypass,
		"served", cl.ok, "units", cl.units, "units_reported", cl.reported,
		"estimate_usd_micros", int64(p.max), "actual_usd_micros", int64(actual.Cost))
}

// forwardPaid relays one call. served is false for error statuses and
// failures, which are not charged.
func (g *Gateway) forwardPaid(rctx context.Context, cl *Call, w http.ResponseWriter) (units int64, reported, served bool, err error) {
	p := cl.paid
	ctx, cancel := context.WithTimeout(rctx, p.cfg.Timeout)
	defer cancel()
	target := strings.TrimSuffix(p.cfg.BaseURL, "/") + strings.TrimPrefix(cl.req.Target, p.cfg.Prefix)
	req, err := http.NewRequestWithContext(ctx, cl.req.Method, target, bytes.NewReader(cl.body))
	if err != nil {
		return 0, false, false, err
	}
	for _, k := range []string{"Content-Type", "Accept", "User-Agent"} {
		if v := cl.req.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	g.inject(ctx, req.Header)
	if p.cfg.APIKey != "" {
		if strings.EqualFold(p.cfg.AuthHeader, "Authorization") {
			req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
		} else {
			req.Header.Set(p.cfg.AuthHeader, p.cfg.APIKey)
		}
	}
	resp, err := p.rt.RoundTrip(req) // as target.rt: a redirect is relayed, not followed
	if err != nil {
		if rctx.Err() != nil {
			return 0, false, false, ErrClientCanceled
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, false, false, ErrUpstreamTimeout
		}
		return 0, false, false, ErrUpstream
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "Cache-Control", "Content-Disposition"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("X-Tollgate-Upstream", p.cfg.Name)
	served = resp.StatusCode >= 200 && resp.StatusCode < 300
	if h := p.cfg.UnitsHeader; h != "" {
		if v, err := strconv.ParseInt(resp.Header.Get(h), 10, 64); err == nil {
			units, reported = v, true
		}
	}
	if p.cfg.UnitsJSON == "" {
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return units, reported, served, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if res := gjson.GetBytes(data, p.cfg.UnitsJSON); err == nil && res.Type == gjson.Number {
		units, reported = res.Int(), true
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
	return units, reported, served, nil
}

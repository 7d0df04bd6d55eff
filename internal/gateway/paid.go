package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// paidRoute is a generic paid HTTP API behind a path prefix.
type paidRoute struct {
	cfg config.PaidRoute
	rt  http.RoundTripper
	// max is what one call can cost at most: per request + per unit ×
	// max units.
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

// price is what a call of units costs by the route's rule, saturated far
// past any budget rather than wrapped.
func (p *paidRoute) price(units int64) budget.Money {
	hi, lo := bits.Mul64(uint64(p.cfg.PerUnit.Value), uint64(units))
	if hi != 0 || lo > 1<<62 {
		return 1 << 62
	}
	return budget.Money(p.cfg.PerRequest.Value + int64(lo))
}

// billed says whether the API bills an answer of status.
func (p *paidRoute) billed(status int) bool {
	return !slices.Contains(p.cfg.UnbilledStatuses, status)
}

// AdmitPaid is Admit for the paid route name. Its path is checked (a path
// that could reach another endpoint of the paid host is refused), the
// most units the call may be billed are read from the request
// (units_limit) and checked against max_units, and the call is reserved
// at per request + per unit × those units.
func (g *Gateway) AdmitPaid(ctx context.Context, name string, req Request) (*Call, error) {
	cl := g.begin(req)
	p := cl.settings.paid[name]
	cl.paid, cl.model, cl.upstream = p, name, name
	path, query, err := paidTarget(p.cfg.Prefix, req.Target)
	if err != nil {
		cl.outcome = "refused"
		return cl, err
	}
	cl.paidTarget = strings.TrimSuffix(p.cfg.BaseURL, "/") + path + query
	body, err := req.Body()
	if err != nil {
		cl.outcome = "refused"
		return cl, err
	}
	cl.body = body
	if p.cfg.PerUnit.Value > 0 {
		if cl.unitsBound, err = bound.PaidUnits(p.cfg.UnitsLimit, strings.TrimPrefix(query, "?"), req.Header, body, p.cfg.MaxUnits); err != nil {
			cl.outcome = "refused"
			return cl, err
		}
	}
	cl.limits = cl.principal.Limits(policy.RequestKey{User: cl.user, Model: name, Route: req.Route, ID: cl.id, IP: req.IP})
	cl.estimate = budget.Amounts{Requests: cl.settings.cost(req.Route), Cost: p.price(cl.unitsBound)}
	return cl, g.admit(ctx, cl, body)
}

// paidTarget splits a request target under prefix into the path to append
// to the route's base URL and its query ("?..." or ""). The path is
// forwarded as the client wrote it, so what could make the paid host read
// it as another path is refused: dot segments ("..", ".", "..;x"), encoded
// dots, slashes and backslashes (once or twice encoded), backslashes and
// empty segments ("//"; a trailing slash is kept).
func paidTarget(prefix, target string) (path, query string, err error) {
	path, q, hasQuery := strings.Cut(target, "?")
	if hasQuery {
		query = "?" + q
	}
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok || rest != "" && rest[0] != '/' {
		return "", "", &bound.RequestError{Message: fmt.Sprintf("the path %q is not under this route's prefix %s", path, prefix)}
	}
	segs := strings.Split(rest, "/")
	for i, seg := range segs[min(1, len(segs)):] {
		bad := ""
		once, err := url.PathUnescape(seg)
		name, _, _ := strings.Cut(once, ";") // Tomcat-style path parameters: "..;x" is ".."
		switch lower := strings.ToLower(seg); {
		case err != nil:
			bad = "a malformed escape"
		case name == "" && (seg != "" || i < len(segs)-2):
			bad = "an empty segment (// or /;x)"
		case name == "." || name == "..":
			bad = "a dot segment"
		case strings.Contains(lower, "%2e") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") ||
			strings.Contains(once, "\\") || strings.Contains(strings.ToLower(once), "%"):
			bad = "an encoded dot, slash, backslash or percent sign, or a backslash"
		}
		if bad != "" {
			return "", "", &bound.RequestError{Message: fmt.Sprintf("the path %q has %s; paid routes forward plain paths only", path, bad)}
		}
	}
	return rest, query, nil
}

// finishPaid settles a paid call: an answer the API bills at the route's
// rule, with the units it reported (rounded up) or, when it reported none,
// the most the request allowed; an unbilled status nothing; a call
// forwarded that got no answer its reservation; a call never sent nothing.
// Units past what the request allowed are charged as reported: an overrun,
// which settle counts and alerts on.
func (g *Gateway) finishPaid(ctx context.Context, cl *Call) {
	p := cl.paid
	actual := budget.Amounts{}
	units, estimated := cl.units, !cl.reported
	if estimated {
		units = cl.unitsBound
	}
	charged := cl.ok || cl.chargeReserved
	if charged {
		actual = budget.Amounts{Requests: cl.estimate.Requests, Cost: p.price(units)}
		if cl.chargeReserved {
			actual.Cost, units = cl.estimate.Cost, cl.unitsBound
		}
		g.metrics.SpendMicros.WithLabelValues(cl.principal.Team, cl.model).Add(float64(actual.Cost))
	}
	if cl.abandoned != "" {
		g.metrics.AttemptsAbandoned.WithLabelValues(cl.model, cl.abandoned).Inc()
	}
	e := cl.entry()
	e.Usage.Estimated, e.Cost, e.Served, e.Degraded = estimated && charged, actual.Cost, cl.ok, cl.degraded
	e.Units = units
	e.Settlement, e.Abandoned = cl.settlement(), cl.abandoned
	if charged && estimated {
		e.Settlement = SettledAtReservation
	}
	outcome := g.settle(ctx, cl, cl.held(), e, actual)
	g.log.Info("request", "request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team, "key", cl.principal.Key,
		"route", p.cfg.Prefix, "reservation", e.ReservationID, "outcome", outcome.String(), "degraded", cl.degraded, "bypass", cl.bypass,
		"served", cl.ok, "status", cl.status, "units", units, "units_reported", cl.reported, "units_bound", cl.unitsBound,
		"estimate_usd_micros", int64(cl.estimate.Cost), "actual_usd_micros", int64(actual.Cost))
}

// forwardPaid relays one call. From the moment it is sent the exchange is
// the gateway's, not the client's: a client that leaves does not cancel
// it (the API bills it all the same), only the route's timeout does.
// billed is false for a status the API does not bill and for a call that
// was never sent; a call sent that got no answer is charged its
// reservation (cl.chargeReserved).
func (g *Gateway) forwardPaid(rctx context.Context, cl *Call, w http.ResponseWriter) (units int64, reported, billed bool, err error) {
	p := cl.paid
	if rctx.Err() != nil {
		return 0, false, false, ErrClientCanceled // not sent
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cl.req.Method, cl.paidTarget, bytes.NewReader(cl.body))
	if err != nil {
		return 0, false, false, err
	}
	for _, k := range []string{"Content-Type", "Accept", "User-Agent"} {
		if v := cl.req.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	if h := p.cfg.UnitsLimit.Header; h != "" {
		req.Header.Set(h, cl.req.Header.Get(h)) // the bound the call was reserved for
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
		if unsent(err) {
			return 0, false, false, ErrUpstream
		}
		cl.chargeReserved, cl.abandoned = true, causeConnection
		if errors.Is(err, context.DeadlineExceeded) {
			cl.abandoned = causeTimeout
			return 0, false, false, ErrUpstreamTimeout
		}
		return 0, false, false, ErrUpstream
	}
	defer resp.Body.Close()
	cl.status = resp.StatusCode
	for _, k := range []string{"Content-Type", "Cache-Control", "Content-Disposition", "Location"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("X-Tollgate-Upstream", p.cfg.Name)
	billed = p.billed(resp.StatusCode)
	if h := p.cfg.UnitsHeader; h != "" {
		units, reported = bound.PaidBilled(resp.Header.Get(h))
	}
	defer func() { cl.drained = billed && rctx.Err() != nil }() // read, for no one
	if p.cfg.UnitsJSON == "" {
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return units, reported, billed, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if res := gjson.GetBytes(data, p.cfg.UnitsJSON); err == nil && res.Type == gjson.Number {
		units, reported = bound.PaidBilled(res.Raw)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
	return units, reported, billed, nil
}

package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/policy"
)

// paidRoute is a generic paid HTTP API behind a path prefix.
type paidRoute struct {
	cfg    config.PaidRoute
	client *http.Client
	// max is what one call can cost: the reservation.
	max budget.Money
}

func newPaidRoute(r config.PaidRoute) (*paidRoute, error) {
	hi, lo := bits.Mul64(uint64(r.PerUnit.Value), uint64(r.MaxUnits))
	if hi != 0 || lo > 1<<62 {
		return nil, errors.New("httpapi: paid route " + r.Name + ": per_unit × max_units overflows")
	}
	return &paidRoute{
		cfg:    r,
		client: &http.Client{Transport: newTransport(10*time.Second, r.Timeout), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		max:    budget.Money(r.PerRequest.Value + int64(lo)),
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

// paid serves one paid route: reserve the rule's maximum, forward the call
// as it is, price it from the answer, settle.
func (g *Gateway) paid(name string) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := settingsOf(c)
		p := st.paid[name]
		cl := &call{id: rand.Text()[:20], principal: principalOf(c), start: time.Now(), engine: g.engine, outcome: "error",
			settings: st, routePath: p.cfg.Prefix, model: name, upstream: name}
		c.Response().Header().Set("X-Tollgate-Request-Id", cl.id)
		body, err := readBody(c, st.maxBody)
		if err != nil {
			return err
		}
		cl.user = c.Request().Header.Get(st.userHeader)
		cl.limits = cl.principal.Limits(policy.RequestKey{User: cl.user, Model: name, Route: p.cfg.Prefix, ID: cl.id,
			IP: authguard.ClientIP(c.Request(), st.trusted)})
		cl.estimate = budget.Amounts{Requests: st.cost(p.cfg.Prefix), Cost: p.max}
		if err := g.bypass(c, cl, body); err != nil {
			return err
		}
		res, admitted, err := g.admit(c, cl, p.cfg.Prefix)
		if !admitted {
			return err
		}
		g.admitted(c, cl, res)
		units, reported, served, err := g.forwardPaid(c, p, body)
		rctx := c.Request().Context()
		g.afterResponse(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), 5*time.Second)
			defer cancel()
			actual := budget.Amounts{}
			cost, estimated := p.cost(units, reported)
			if served {
				actual = budget.Amounts{Requests: cl.estimate.Requests, Cost: cost}
				g.metrics.SpendMicros.WithLabelValues(cl.principal.Team, name).Add(float64(actual.Cost))
			}
			e := cl.entry()
			e.Usage.Estimated, e.Cost, e.Served, e.Degraded = estimated && served, actual.Cost, served, cl.degraded
			outcome := g.settle(ctx, cl, e, actual)
			g.log.Info("request", "request_id", cl.id, "org", cl.principal.Org, "team", cl.principal.Team, "key", cl.principal.Key,
				"route", p.cfg.Prefix, "reservation", e.ReservationID, "outcome", outcome.String(), "degraded", cl.degraded, "bypass", cl.bypass,
				"served", served, "units", units, "units_reported", reported,
				"estimate_usd_micros", int64(p.max), "actual_usd_micros", int64(actual.Cost))
		})
		return err
	}
}

// forwardPaid relays one call. served is false for error statuses and
// failures, which are not charged.
func (g *Gateway) forwardPaid(c echo.Context, p *paidRoute, body []byte) (units int64, reported, served bool, err error) {
	in := c.Request()
	ctx, cancel := context.WithTimeout(in.Context(), p.cfg.Timeout)
	defer cancel()
	target := strings.TrimSuffix(p.cfg.BaseURL, "/") + strings.TrimPrefix(in.URL.Path, p.cfg.Prefix)
	if in.URL.RawQuery != "" {
		target += "?" + in.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, target, bytes.NewReader(body))
	if err != nil {
		return 0, false, false, err
	}
	for _, k := range []string{"Content-Type", "Accept", "User-Agent"} {
		if v := in.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	if p.cfg.APIKey != "" {
		if strings.EqualFold(p.cfg.AuthHeader, "Authorization") {
			req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
		} else {
			req.Header.Set(p.cfg.AuthHeader, p.cfg.APIKey)
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if in.Context().Err() != nil {
			return 0, false, false, errClientCanceled
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, false, false, errUpstreamTime
		}
		return 0, false, false, errUpstream
	}
	defer resp.Body.Close()
	w := c.Response()
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

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
		pr := principalOf(c)
		id := rand.Text()[:20]
		c.Response().Header().Set("X-Tollgate-Request-Id", id)
		body, err := readBody(c, st.maxBody)
		if err != nil {
			return err
		}
		user := c.Request().Header.Get(st.userHeader)
		limits := pr.Limits(policy.RequestKey{User: user, Model: name, Route: p.cfg.Prefix, ID: id, IP: authguard.ClientIP(c.Request(), st.trusted)})
		est := budget.Amounts{Requests: st.cost(p.cfg.Prefix), Cost: p.max}
		e := &Entry{Time: time.Now(), RequestID: id, Org: pr.Org, Team: pr.Team, Key: pr.Key, User: user,
			Route: p.cfg.Prefix, Model: name, Upstream: name, Usage: budget.Usage{Estimated: true},
			Cost: p.max, Reserved: p.max, Served: true}
		var pre *Entry
		if g.engine.KeepsLedger() || g.ledger.Load() != nil {
			pre = new(*e)
		}
		r, res, err := g.engine.ReserveFor(c.Request().Context(), limits, est, pre)
		if err != nil {
			var refused *budget.RefusedError
			if errors.As(err, &refused) {
				rf := mapRefused(refused, g.facts(refused, est))
				g.metrics.Refusals.WithLabelValues(rf.reason, refused.Limit.Scope.String(), refused.Limit.Name, pr.Team).Inc()
				g.writeRefusal(c, rf, limits)
				return nil
			}
			return err
		}
		writeLimitHeaders(c.Response().Header(), limits, res)

		units, reported, served, err := g.forwardPaid(c, p, body)
		actual := budget.Amounts{}
		cost, estimated := p.cost(units, reported)
		if served {
			actual = budget.Amounts{Requests: est.Requests, Cost: cost}
		}
		e.ReservationID = r.ID
		e.Usage.Estimated, e.Cost, e.Served = estimated && served, actual.Cost, served
		rctx := c.Request().Context()
		g.afterResponse(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), 5*time.Second)
			defer cancel()
			outcome, serr := g.engine.SettleEntry(ctx, r, actual, e)
			if serr != nil {
				g.log.Error("settling", "request_id", id, "reservation", r.ID, "err", serr)
			}
			if served {
				g.metrics.SpendMicros.WithLabelValues(pr.Team, name).Add(float64(actual.Cost))
			}
			e.Outcome = outcome.String()
			if f := g.ledger.Load(); f != nil {
				(*f)(*e)
			}
			g.log.Info("request", "request_id", id, "org", pr.Org, "team", pr.Team, "key", pr.Key, "route", p.cfg.Prefix,
				"reservation", r.ID, "outcome", outcome.String(), "served", served, "units", units, "units_reported", reported,
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

package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

const teamBudget = `{name: usd-month, kind: budget, unit: usd, amount: "$1", period: month}`

// A request the gateway will not price or let the key use is refused
// before anything is reserved, and leaves no trace.
func TestAdmitRefusesWhatItCannotBound(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	unreadable := errors.New("the client's body broke off")
	for _, tc := range []struct {
		desc, key string
		ep        bound.Endpoint
		body      string
		readErr   error
		check     func(error) bool
	}{
		{desc: "an unknown model", key: fullKey, ep: bound.Chat, body: `{"model":"nope","messages":[{"role":"user","content":"x"}]}`,
			check: func(err error) bool {
				var m *gateway.ModelError
				return errors.As(err, &m) && !m.Allowed && m.Model == "nope"
			}},
		{desc: "a model the key may not use", key: narrowKey, ep: bound.Chat, body: `{"model":"m2","messages":[{"role":"user","content":"x"}]}`,
			check: func(err error) bool { var m *gateway.ModelError; return errors.As(err, &m) && m.Allowed }},
		{desc: "a body that is not JSON", key: fullKey, ep: bound.Chat, body: `{"model":`,
			check: func(err error) bool { var r *bound.RequestError; return errors.As(err, &r) }},
		{desc: "an output cap past the model's", key: fullKey, ep: bound.Chat, body: `{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"x"}]}`,
			check: func(err error) bool { var r *bound.RequestError; return errors.As(err, &r) }},
		{desc: "a Messages request without max_tokens", key: fullKey, ep: bound.Messages, body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			check: func(err error) bool {
				var r *bound.RequestError
				return errors.As(err, &r) && r.Param == "max_tokens"
			}},
		{desc: "a body that cannot be read", key: fullKey, ep: bound.Chat, readErr: unreadable,
			check: func(err error) bool { return errors.Is(err, unreadable) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req := f.request(tc.key, "/v1/chat/completions", tc.body)
			if tc.readErr != nil {
				req.Body = func() ([]byte, error) { return nil, tc.readErr }
			}
			o := f.do(context.Background(), tc.ep, req)
			if !tc.check(o.err) {
				t.Fatalf("error %v (%T)", o.err, o.err)
			}
			if o.call.Outcome() != "refused" {
				t.Errorf("outcome %q", o.call.Outcome())
			}
		})
	}
	if n := len(f.up.requests()); n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	if spent, pending := f.spent(); spent != 0 || pending != 0 || f.store.Open() != 0 {
		t.Errorf("refused requests left spent %d, pending %d, %d open", spent, pending, f.store.Open())
	}
	if got := counter(t, f.metrics.Requests, "/v1/chat/completions", "ml", "", "refused"); got != 6 {
		t.Errorf("tollgate_requests_total{outcome=refused} = %v, want 6", got)
	}
}

// Every kind of limit refuses with a *Refused that names the limit and
// carries what the adapter tells the client; nothing is reserved.
func TestLimitsRefuseWithTheirFacts(t *testing.T) {
	for _, tc := range []struct {
		desc, limits string
		before       func(f *fixture)
		sentinel     error
		estimate     int64
		fit          int64 // -1: not checked
	}{
		{desc: "larger than what remains", limits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.00022", period: month}`,
			before:   func(f *fixture) { f.chat(fullKey, hello) }, // 10 + 2×5 µ$ settled of 220: 8 + 2×96 fits
			sentinel: budget.ErrOverBudget, estimate: 208, fit: 96},
		{desc: "spent to the ceiling", limits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.00002", period: month}`,
			before: func(f *fixture) {
				f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
					return jsonAnswer(r, 200, chatJSON(20, 0)), nil
				})
				f.chat(fullKey, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
			},
			sentinel: budget.ErrExhausted, estimate: 208, fit: -1},
		{desc: "a request per minute", limits: `{name: rpm, kind: rate, unit: requests, amount: 1, window: 1m}`,
			before: func(f *fixture) { f.chat(fullKey, hello) }, sentinel: budget.ErrRateLimited, estimate: 1, fit: -1},
		{desc: "too large for the limit", limits: `{name: tpm, kind: rate, unit: tokens, amount: 50, window: 1m}`,
			sentinel: budget.ErrTooLarge, estimate: 108, fit: -1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, setup{teamLimits: tc.limits})
			if tc.before != nil {
				tc.before(f)
			}
			reached := len(f.up.requests())
			o := f.chat(fullKey, hello)
			var r *gateway.Refused
			if !errors.As(o.err, &r) || !errors.Is(o.err, tc.sentinel) {
				t.Fatalf("error %v, want a refusal of %v", o.err, tc.sentinel)
			}
			if r.Limit.Scope != budget.ScopeTeam || r.Estimate != tc.estimate || len(r.Limits) == 0 || len(r.Result.Status) != len(r.Limits) {
				t.Fatalf("refusal %+v: scope %v, estimate %d (want %d), %d limits for %d statuses", r, r.Limit.Scope, r.Estimate, tc.estimate, len(r.Limits), len(r.Result.Status))
			}
			// The request named no cap: the gateway writes chat's own.
			if tc.fit >= 0 && (r.Fit != tc.fit || r.CapField != "max_completion_tokens") {
				t.Fatalf("fit %d in %q, want %d in max_completion_tokens", r.Fit, r.CapField, tc.fit)
			}
			if len(f.up.requests()) != reached || f.store.Open() != 0 {
				t.Fatalf("the refused request reached the upstream or left a reservation open")
			}
		})
	}
}

// A budget held by a request in flight refuses with a retry from how long
// reservations stay open; a concurrency slot the same way; both admit
// again once the first settles.
func TestHeldBudgetsAndSlots(t *testing.T) {
	for _, tc := range []struct {
		desc, limits string
		sentinel     error
		retry        time.Duration
	}{
		{"a held budget", `{name: usd-month, kind: budget, unit: usd, amount: "$0.0003", period: month}`, budget.ErrHeld, budget.HeldRetry},
		{"a concurrency slot", `{name: slots, kind: concurrency, unit: requests, amount: 1}`, budget.ErrConcurrency, time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, setup{teamLimits: tc.limits})
			first, err := f.gw.Admit(context.Background(), bound.Chat, f.request(fullKey, "/v1/chat/completions", hello))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.gw.Admit(context.Background(), bound.Chat, f.request(fullKey, "/v1/chat/completions", hello))
			var r *gateway.Refused
			if !errors.As(err, &r) || !errors.Is(err, tc.sentinel) || r.Result.RetryAfter != tc.retry {
				t.Fatalf("while the first is in flight: %v (retry %v), want %v and %v", err, r, tc.sentinel, tc.retry)
			}
			f.serve(context.Background(), first, nil)
			if o := f.chat(fullKey, hello); o.err != nil {
				t.Fatalf("after the first settled: %v", o.err)
			}
		})
	}
}

// A budget that allows clamping lowers the output cap to what fits, and
// the body forwarded carries the lowered cap.
func TestClampLowersTheCapToWhatFits(t *testing.T) {
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.0001", period: month, over_budget: clamp, clamp_min_output_tokens: 10}`})
	o := f.chat(fullKey, `{"model":"m","max_tokens":500,"messages":[{"role":"user","content":"hello"}]}`)
	if o.err != nil {
		t.Fatal(o.err)
	}
	k := o.call.Clamped()
	if k == nil || k.Field != "max_tokens" || k.Requested != 500 || k.Granted < 10 || k.Granted >= 500 {
		t.Fatalf("clamp %+v", k)
	}
	sent := f.up.requests()[0].body
	if !strings.Contains(sent, `"max_tokens":`+strconv.FormatInt(k.Granted, 10)) {
		t.Fatalf("forwarded %s, want max_tokens %d", sent, k.Granted)
	}
	// Below the clamp's minimum the refusal stands.
	f2 := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.00002", period: month, over_budget: clamp, clamp_min_output_tokens: 10}`})
	if o := f2.chat(fullKey, hello); !errors.Is(o.err, budget.ErrOverBudget) {
		t.Fatalf("a request that cannot fit even its minimum: %v", o.err)
	}
}

// A signed request and an unlimited key pass every limit, which still
// counts them; a bad or replayed signature is refused.
func TestBypass(t *testing.T) {
	f := newFixture(t, setup{teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$0.00001", period: month}`})
	signed := func(nonce string, at time.Time) gateway.Request {
		req := f.request(fullKey, "/v1/chat/completions", hello)
		req.Signature = gateway.Sign([]byte(secret), "POST", "/v1/chat/completions", []byte(hello), at, nonce)
		return req
	}
	if o := f.chat(fullKey, hello); !errors.Is(o.err, budget.ErrOverBudget) {
		t.Fatalf("unsigned: %v", o.err)
	}
	if o := f.do(context.Background(), bound.Chat, signed("n1", f.clock.Now())); o.err != nil {
		t.Fatalf("signed: %v", o.err)
	}
	for _, tc := range []struct {
		desc string
		req  gateway.Request
	}{
		{"replayed", signed("n1", f.clock.Now())},
		{"outside the window", signed("n2", f.clock.Now().Add(-time.Hour))},
		{"another body", func() gateway.Request {
			r := signed("n3", f.clock.Now())
			r.Body = func() ([]byte, error) { return []byte(strings.Replace(hello, "hello", "hullo", 1)), nil }
			return r
		}()},
	} {
		if o := f.do(context.Background(), bound.Chat, tc.req); !errors.Is(o.err, gateway.ErrBadSignature) {
			t.Errorf("%s: %v", tc.desc, o.err)
		}
	}
	if o := f.chat(openKey, hello); o.err != nil {
		t.Fatalf("unlimited key: %v", o.err)
	}
	if got := counter(t, f.metrics.Bypasses, "batch", "ml") + counter(t, f.metrics.Bypasses, "unlimited-key", "ml"); got != 2 {
		t.Errorf("bypasses counted %v, want 2", got)
	}
	// Both are metered and priced as usual, and the ledger says who
	// bypassed.
	for _, e := range f.ledger() {
		if e.Bypass == "" || e.Cost != 10+2*5 {
			t.Errorf("ledger entry %+v", e)
		}
	}
	if n := len(f.ledger()); n != 2 {
		t.Errorf("%d ledger entries, want 2", n)
	}
}

// A shadow limit that would refuse lets the request through and counts it.
func TestShadowLimitsCountWithoutRefusing(t *testing.T) {
	f := newFixture(t, setup{teamLimits: `{name: trial, kind: budget, unit: usd, amount: "$0.00001", period: month, shadow: true}`})
	if o := f.chat(fullKey, hello); o.err != nil {
		t.Fatal(o.err)
	}
	if got := counter(t, f.metrics.ShadowRefusals, "team", "trial", "ml"); got != 1 {
		t.Fatalf("shadow refusals %v, want 1", got)
	}
}

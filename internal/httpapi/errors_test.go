package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Every error the request path meets has one row in the error table: a
// status, a code, and the reason the refusals metric counts it under.
func TestTheErrorTable(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := budget.NewEngine(store, time.Minute)
	ctx := context.Background()
	ceiling := func(name string, amount int64) budget.Limit {
		return budget.Limit{Bucket: name, Name: name, Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: amount, Period: budget.Month}
	}
	refusal := func(limit budget.Limit, first, second budget.Amounts, settle bool) error {
		t.Helper()
		r, _, err := e.Reserve(ctx, []budget.Limit{limit}, first)
		if err != nil {
			t.Fatal(err)
		}
		if settle {
			if _, err := e.Settle(ctx, r, first); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err = e.Reserve(ctx, []budget.Limit{limit}, second)
		if err == nil {
			t.Fatalf("%s: not refused", limit.Bucket)
		}
		return err
	}
	usd := func(v int64) budget.Amounts { return budget.Amounts{Requests: 1, Cost: budget.Money(v)} }
	rate := budget.Limit{Bucket: "rpm", Name: "rpm", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Requests, Amount: 1, Window: time.Minute}
	inFlight := budget.Limit{Bucket: "in-flight", Name: "in-flight", Scope: budget.ScopeTeam, Kind: budget.Concurrency, Unit: budget.Requests, Amount: 1}
	tpm := budget.Limit{Bucket: "tpm", Name: "tpm", Scope: budget.ScopeKey, Kind: budget.Rate, Unit: budget.Tokens, Amount: 5, Window: time.Minute}
	// Each row as both client shapes get it: status, code, reason, the
	// OpenAI and Anthropic error types, X-Should-Retry ("" none) and
	// whether a Retry-After is sent.
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		err                error
		status             int
		code, reason       string
		openAIType, anType string
		shouldRetry        string
		retryAfter         bool
	}{
		{refusal(ceiling("spent", 10), usd(10), usd(1), true), 400, "insufficient_quota", "budget_exhausted", "insufficient_quota", "billing_error", "false", false},
		{refusal(ceiling("small", 10), usd(4), usd(7), true), 400, "request_exceeds_budget_remaining", "budget_too_small_for_request", "invalid_request_error", "invalid_request_error", "false", false},
		{refusal(ceiling("held", 10), usd(6), usd(6), false), 429, "budget_held_by_requests_in_flight", "budget_held", "rate_limit_error", "rate_limit_error", "true", true},
		{refusal(rate, usd(0), usd(0), false), 429, "rate_limit_exceeded", "rate_limited", "rate_limit_error", "rate_limit_error", "", true},
		{refusal(inFlight, usd(0), usd(0), false), 429, "concurrency_limit_exceeded", "concurrency", "rate_limit_error", "rate_limit_error", "", true},
		{refusal(tpm, budget.Amounts{Tokens: 1}, budget.Amounts{Tokens: 10}, false), 400, "request_too_large_for_limit", "too_large_for_limit", "invalid_request_error", "invalid_request_error", "false", false},
		{fmt.Errorf("reserving: %w", budget.ErrStoreUnavailable), 503, "budget_store_unavailable", "store_unavailable", "server_error", "overloaded_error", "", true},
		{gateway.ErrLedgerUnavailable, 503, "ledger_unavailable", "ledger_unavailable", "server_error", "overloaded_error", "", true},
		{&gateway.UpstreamRefused{Code: "upstream_queue_full"}, 503, "upstream_queue_full", "upstream_queue_full", "server_error", "overloaded_error", "", true},
		{&authThrottled{retryAfter: 5 * time.Second}, 429, "too_many_auth_failures", "error", "rate_limit_error", "rate_limit_error", "", true},
		{&bound.RequestError{Param: "n", Message: "n must be at least 1"}, 400, "invalid_request", "bad_request", "invalid_request_error", "invalid_request_error", "", false},
		{&gateway.ModelError{Model: "m", Allowed: true}, 403, "model_not_allowed", "model_not_allowed", "permission_error", "permission_error", "", false},
		{&gateway.ModelError{Model: "m"}, 400, "model_not_found", "model_not_found", "invalid_request_error", "invalid_request_error", "", false},
		{errTooLarge, 413, "request_too_large", "body_too_large", "invalid_request_error", "request_too_large", "", false},
		{gateway.ErrUpstreamTimeout, 504, "upstream_timeout", "error", "server_error", "api_error", "", false},
		{gateway.ErrClientCanceled, 499, "client_closed_request", "client_closed", "server_error", "api_error", "", false},
		{errBadKey, 401, "invalid_api_key", "error", "invalid_request_error", "authentication_error", "", false},
		{errors.New("anything else"), http.StatusInternalServerError, "internal_error", "error", "server_error", "api_error", "", false},
	} {
		r := mapError(c.err)
		if r.status != c.status || r.body.Code != c.code || r.reason != c.reason {
			t.Errorf("%v: status %d code %q reason %q; want %d %q %q", c.err, r.status, r.body.Code, r.reason, c.status, c.code, c.reason)
		}
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			rec := httptest.NewRecorder()
			ctx := echo.New().NewContext(httptest.NewRequest(http.MethodPost, path, nil), rec)
			ctx.SetPath(path)
			s.handleError(c.err, ctx)
			var body struct {
				Error struct{ Type, Code string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("%v on %s: %v", c.err, path, err)
			}
			want := c.openAIType
			if path == "/v1/messages" {
				want = c.anType
			}
			if rec.Code != c.status || body.Error.Code != c.code || body.Error.Type != want {
				t.Errorf("%v on %s: %d %s/%s, want %d %s/%s", c.err, path, rec.Code, body.Error.Type, body.Error.Code, c.status, want, c.code)
			}
			if got := rec.Header().Get("X-Should-Retry"); got != c.shouldRetry {
				t.Errorf("%v on %s: X-Should-Retry %q, want %q", c.err, path, got, c.shouldRetry)
			}
			if got := rec.Header().Get("Retry-After") != ""; got != c.retryAfter {
				t.Errorf("%v on %s: Retry-After %q, want one: %v", c.err, path, rec.Header().Get("Retry-After"), c.retryAfter)
			}
		}
	}
}

// A budget's refusal says what is spent as it is: past the ceiling when a
// settlement cost more than its reservation, never the ceiling in its
// place; a held budget has left what is unspent, not what it holds.
func TestRefusalsSaySpendPastTheCeiling(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := budget.NewEngine(store, time.Minute)
	ctx := context.Background()
	usd := func(v budget.Money) budget.Amounts { return budget.Amounts{Requests: 1, Cost: v} }
	ceiling := func(name string) []budget.Limit {
		return []budget.Limit{{Bucket: name, Name: name, Scope: budget.ScopeTeam, Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: int64(10 * budget.Dollar), Period: budget.Month}}
	}
	spend := func(limits []budget.Limit, reserved, actual budget.Money) {
		t.Helper()
		r, _, err := e.Reserve(ctx, limits, usd(reserved))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(ctx, r, usd(actual)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		desc  string
		setup func(limits []budget.Limit)
		code  string
		want  string
	}{
		{"exhausted past the ceiling", func(limits []budget.Limit) {
			spend(limits, 3*budget.Dollar, 12*budget.Dollar)
		}, "insufficient_quota", "$12.00 of $10.00 is spent"},
		{"held with spend and holds past the ceiling", func(limits []budget.Limit) {
			if _, _, err := e.Reserve(ctx, limits, usd(4*budget.Dollar)); err != nil {
				t.Fatal(err)
			}
			spend(limits, 2*budget.Dollar, 8*budget.Dollar)
		}, "budget_held_by_requests_in_flight", "has $2.00 left, but requests in flight hold $4.00 of it"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			limits := ceiling(c.desc)
			c.setup(limits)
			_, _, err := e.Reserve(ctx, limits, usd(budget.Dollar))
			if err == nil {
				t.Fatal("not refused")
			}
			r := mapError(err)
			if r.body.Code != c.code || !strings.Contains(r.body.Message, c.want) {
				t.Fatalf("%s: %q; want it to say %q", r.body.Code, r.body.Message, c.want)
			}
		})
	}
}

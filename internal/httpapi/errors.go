package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// row is how one error is answered: status, body, Retry-After, and the
// reason the refusals metric counts it under.
type row struct {
	status     int
	reason     string
	typ, code  string
	message    string
	retryAfter time.Duration
}

func (r row) refusal() refusal {
	return refusal{status: r.status, reason: r.reason, retryAfter: r.retryAfter, body: apiError{Message: r.message, Type: r.typ, Code: r.code}}
}

// adapterError is an error of the adapter's own (authentication, the
// request's body, routing), declared with its row of the table.
type adapterError struct{ row }

func (e *adapterError) Error() string { return "httpapi: " + e.code }

var (
	errNoKey = &adapterError{row{status: http.StatusUnauthorized, reason: "error", typ: "invalid_request_error", code: "missing_api_key",
		message: "No API key provided. Send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'."}}
	errBadKey = &adapterError{row{status: http.StatusUnauthorized, reason: "error", typ: "invalid_request_error", code: "invalid_api_key",
		message: "Incorrect API key provided."}}
	errBodyTimeout = &adapterError{row{status: http.StatusRequestTimeout, reason: "error", typ: "invalid_request_error", code: "request_body_timeout",
		message: "The request body did not arrive in time (server.body_timeout, server.min_body_rate)."}}
	errTooLarge = &adapterError{row{status: http.StatusRequestEntityTooLarge, reason: "body_too_large", typ: "invalid_request_error", code: "request_too_large",
		message: "The request body is larger than the gateway accepts."}}
	errNotFound = &adapterError{row{status: http.StatusNotFound, reason: "error", typ: "invalid_request_error", code: "unknown_url",
		message: "Unknown route."}}
	errMethod = &adapterError{row{status: http.StatusMethodNotAllowed, reason: "error", typ: "invalid_request_error", code: "method_not_allowed",
		message: "Method not allowed on this route."}}
	errInternal = &adapterError{row{status: http.StatusInternalServerError, reason: "error", typ: "server_error", code: "internal_error",
		message: "Internal gateway error."}}
)

// sentinelRows are the other packages' sentinel errors, each answered
// the same way every time.
var sentinelRows = []struct {
	err error
	row row
}{
	{gateway.ErrBadSignature, row{status: http.StatusUnauthorized, reason: "error", typ: "invalid_request_error", code: "invalid_bypass_signature",
		message: "The bypass signature does not verify (secret, request, time or a replayed nonce)."}},
	{budget.ErrStoreUnavailable, row{status: http.StatusServiceUnavailable, reason: "store_unavailable", typ: "server_error", code: "budget_store_unavailable",
		message: "The budget store is unavailable; the request was not forwarded.", retryAfter: time.Second}},
	{gateway.ErrLedgerUnavailable, row{status: http.StatusServiceUnavailable, reason: "ledger_unavailable", typ: "server_error", code: "ledger_unavailable",
		message: "The gateway cannot write its ledger (a full or failing disk); it admits nothing it could not record. The request was not forwarded.", retryAfter: time.Second}},
	{gateway.ErrUpstreamTimeout, row{status: http.StatusGatewayTimeout, reason: "error", typ: "server_error", code: "upstream_timeout",
		message: "The upstream did not answer in time."}},
	{gateway.ErrUpstream, row{status: http.StatusBadGateway, reason: "error", typ: "server_error", code: "upstream_unreachable",
		message: "The upstream could not be reached."}},
	{gateway.ErrClientCanceled, row{status: 499, reason: "client_closed", typ: "server_error", code: "client_closed_request",
		message: "The client closed the request."}},
	{context.Canceled, row{status: 499, reason: "error", typ: "server_error", code: "client_closed_request",
		message: "The client closed the request."}},
}

// authThrottled refuses a client that failed authentication too often.
type authThrottled struct{ retryAfter time.Duration }

func (e *authThrottled) Error() string { return "httpapi: too many failed authentications" }

// apiError is the OpenAI error body.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
	// Tollgate names the limit that refused, when one did.
	Tollgate *limitInfo `json:"tollgate,omitempty"`
}

type limitInfo struct {
	Scope     string  `json:"scope"`
	Limit     string  `json:"limit"`
	Kind      string  `json:"kind"`
	Unit      string  `json:"unit"`
	Amount    int64   `json:"amount"`
	Remaining int64   `json:"remaining"`
	RetryS    float64 `json:"retry_after_seconds"`
	// Estimate is what the request would have taken from the limit, in
	// its unit.
	Estimate int64 `json:"estimate"`
	// Held is what reservations in flight hold of a budget.
	Held *int64 `json:"held,omitempty"`
	// MaxOutputTokensThatFit is the largest output cap (per choice) with
	// which the same request would be admitted now: 0 when none would.
	MaxOutputTokensThatFit *int64 `json:"max_output_tokens_that_fit,omitempty"`
}

// refusalFacts are what the request path knows of a refused request
// beyond the store's answer: its estimate and the cap that would fit.
type refusalFacts struct {
	estimate int64  // in the deciding limit's unit
	fit      int64  // the largest output cap that fits now; -1: not known
	capField string // the request's output cap field
}

// refusal is a response that refuses: status, headers and body, and the
// reason the refusals metric counts it under (with the scope and name of
// the limit that decided, if one did).
type refusal struct {
	status     int
	reason     string
	body       apiError
	retryAfter time.Duration // zero: no Retry-After
	noRetry    bool          // x-should-retry: false
	retry      bool          // x-should-retry: true
	// anthropicType overrides the Anthropic error type the status gives
	// (billing_error for a spent budget).
	anthropicType string
	result        *budget.Result
	// limits, with result, are the request's limits for the limit
	// headers of a limit's refusal.
	limits       []budget.Limit
	scope, limit string
}

// countRefusal counts a refused request under its reason in the one
// table, for team.
func (s *Server) countRefusal(err error, team string) {
	r := mapError(err)
	s.metrics.Refusals.WithLabelValues(r.reason, r.scope, r.limit, team).Inc()
}

// mapError is the one place an error becomes a status, headers, a body
// and a metric reason.
func mapError(err error) refusal {
	var (
		gwRefused *gateway.Refused
		refused   *budget.RefusedError
		reqErr    *bound.RequestError
		mErr      *gateway.ModelError
		upErr     *gateway.UpstreamRefused
		throttled *authThrottled
		own       *adapterError
	)
	switch {
	case errors.As(err, &throttled):
		return refusal{status: http.StatusTooManyRequests, reason: "error", retryAfter: max(throttled.retryAfter, time.Second),
			body: apiError{Message: "Too many failed authentications from this address; wait before trying again.", Type: "rate_limit_error", Code: "too_many_auth_failures"}}
	case errors.As(err, &upErr):
		msg := map[string]string{
			"upstream_circuit_open":  "The upstream is failing and its circuit is open; the request was not forwarded.",
			"upstream_backing_off":   "The upstream asked to back off; the request was not forwarded.",
			"upstream_queue_full":    "The upstream's queue is full; the request was not forwarded.",
			"upstream_queue_timeout": "The request waited its maximum in the upstream's queue; it was not forwarded.",
		}[upErr.Code]
		return refusal{status: http.StatusServiceUnavailable, reason: upErr.Code, scope: "upstream", retryAfter: max(upErr.RetryAfter, time.Second),
			body: apiError{Message: msg, Type: "server_error", Code: upErr.Code}}
	case errors.As(err, &gwRefused):
		r := mapRefused(gwRefused.RefusedError, refusalFacts{estimate: gwRefused.Estimate, fit: gwRefused.Fit, capField: gwRefused.CapField})
		r.limits = gwRefused.Limits
		if gwRefused.After != "" {
			r.body.Message = fmt.Sprintf("The upstream %q did not answer after the request reached it; that attempt may be billed, and stays charged its reservation. Another deployment was not tried: %s",
				gwRefused.After, r.body.Message)
		}
		return r
	case errors.As(err, &refused):
		return mapRefused(refused, refusalFacts{fit: -1})
	case errors.As(err, &reqErr):
		r := refusal{status: http.StatusBadRequest, reason: "bad_request", body: apiError{Message: reqErr.Message, Type: "invalid_request_error", Code: "invalid_request"}}
		if reqErr.Param != "" {
			r.body.Param = &reqErr.Param
		}
		return r
	case errors.As(err, &mErr):
		param := "model"
		if mErr.Allowed {
			return refusal{status: http.StatusForbidden, reason: "model_not_allowed", body: apiError{Message: mErr.Message(), Type: "permission_error", Param: &param, Code: "model_not_allowed"}}
		}
		return refusal{status: http.StatusBadRequest, reason: "model_not_found", body: apiError{Message: mErr.Message(), Type: "invalid_request_error", Param: &param, Code: "model_not_found"}}
	case errors.As(err, &own):
		return own.refusal()
	}
	for _, r := range sentinelRows {
		if errors.Is(err, r.err) {
			return r.row.refusal()
		}
	}
	return errInternal.refusal()
}

// mapRefused is a limit's refusal. A budget says which of three things
// happened: its spend is at the ceiling (exhausted: no retry until the
// period ends); the request is larger than what remains (no retry as it
// is; the body says the largest output cap that fits); reservations in
// flight hold the rest (retry in seconds). What it says is spent is the
// settled spend as it is, past the ceiling if it went there.
//
// The first two are 400s with X-Should-Retry: false and no Retry-After,
// the one shape every client tried reads as final and shows the message
// of (Claude Code, Codex, opencode, the AI SDK, OpenAI's and Anthropic's
// SDKs: docs/refusals.md): on a 429 opencode sleeps out a Retry-After of
// hours and the AI SDK retries, and Codex shows its own "Quota exceeded"
// for a 429 insufficient_quota. The reset time is in the message, the
// body and the limit headers. A held budget is a 429 with a Retry-After of
// seconds, which every client waits out and retries.
func mapRefused(e *budget.RefusedError, f refusalFacts) refusal {
	l := e.Limit
	st := budget.Status{}
	if d := e.Result.Decider; d >= 0 && d < len(e.Result.Status) {
		st = e.Result.Status[d]
	}
	info := &limitInfo{Scope: l.Scope.String(), Limit: l.Name, Kind: l.Kind.String(), Unit: l.Unit.String(),
		Amount: st.Capacity, Remaining: st.Remaining, RetryS: e.Result.RetryAfter.Seconds(), Estimate: f.estimate}
	if f.fit >= 0 {
		info.MaxOutputTokensThatFit = &f.fit
	}
	r := refusal{status: http.StatusTooManyRequests, retryAfter: e.Result.RetryAfter, result: &e.Result, scope: l.Scope.String(), limit: l.Name}
	what := l.Format
	fitHint := "a smaller request may fit"
	if f.fit > 0 && f.capField != "" {
		fitHint = fmt.Sprintf("set %s to at most %d to fit", f.capField, f.fit)
	} else if f.fit == 0 {
		fitHint = "no output cap makes this request fit"
	}
	switch {
	case errors.Is(e, budget.ErrExhausted):
		r.status, r.retryAfter, r.noRetry, r.anthropicType = http.StatusBadRequest, 0, true, "billing_error"
		r.reason = "budget_exhausted"
		r.body = apiError{Type: "insufficient_quota", Code: "insufficient_quota",
			Message: fmt.Sprintf("The %s budget %q is exhausted: %s of %s is spent, and it resets at the end of its %s (%s).", l.Scope, l.Name, what(st.Spent), what(st.Capacity), l.Period, resetsAt(e.Result))}
	case errors.Is(e, budget.ErrOverBudget):
		r.status, r.retryAfter, r.noRetry = http.StatusBadRequest, 0, true
		r.reason = "budget_too_small_for_request"
		r.body = apiError{Type: "invalid_request_error", Code: "request_exceeds_budget_remaining",
			Message: fmt.Sprintf("This request is estimated at %s, more than the %s budget %q has left (%s of %s, until %s); %s.", what(f.estimate), l.Scope, l.Name, what(st.Remaining), what(st.Capacity), resetsAt(e.Result), fitHint)}
	case errors.Is(e, budget.ErrHeld):
		r.retryAfter = min(r.retryAfter, maxHeldRetry)
		r.retry = true
		held := st.Held
		info.Held = &held
		r.reason = "budget_held"
		r.body = apiError{Type: "rate_limit_error", Code: "budget_held_by_requests_in_flight",
			Message: fmt.Sprintf("The %s budget %q has %s left, but requests in flight hold %s of it until they finish; this request (estimated at %s) fits once they settle: retry in %s%s.", l.Scope, l.Name, what(st.Capacity-st.Spent), what(held), what(f.estimate), r.retryAfter.Round(time.Second), heldHint(f))}
	case errors.Is(e, budget.ErrTooLarge):
		r.status, r.retryAfter, r.noRetry = http.StatusBadRequest, 0, true // waiting never helps
		r.reason = "too_large_for_limit"
		r.body = apiError{Type: "invalid_request_error", Code: "request_too_large_for_limit",
			Message: fmt.Sprintf("The request needs more than the %s limit %q can ever grant (%d %s).", l.Scope, l.Name, st.Capacity, l.Unit)}
	case errors.Is(e, budget.ErrConcurrency):
		r.reason = "concurrency"
		r.body = apiError{Type: "rate_limit_error", Code: "concurrency_limit_exceeded",
			Message: fmt.Sprintf("Too many requests in flight for the %s limit %q (%d).", l.Scope, l.Name, st.Capacity)}
	default:
		r.reason = "rate_limited"
		r.body = apiError{Type: "rate_limit_error", Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("Rate limit %q of the %s reached (%d %s per %s). Retry after %s.", l.Name, l.Scope, l.Amount, l.Unit, l.Window, e.Result.RetryAfter.Round(time.Millisecond))}
	}
	r.body.Tollgate = info
	return r
}

// heldHint is what a held budget's refusal adds after "retry in …": the
// cap that fits now, where one does.
func heldHint(f refusalFacts) string {
	if f.fit > 0 && f.capField != "" {
		return fmt.Sprintf(", or set %s to at most %d to fit now", f.capField, f.fit)
	}
	return ""
}

// maxHeldRetry caps a held budget's Retry-After: the AI SDK ignores one
// of a minute or more, and the reservations holding the budget settle
// within seconds of their answers.
const maxHeldRetry = 30 * time.Second

// resetsAt is when a refused budget's period ends, as RFC 3339 UTC.
func resetsAt(res budget.Result) string {
	return time.Now().Add(res.RetryAfter).UTC().Truncate(time.Second).Format(time.RFC3339)
}

// anthropicErrorBody is Anthropic's error shape, used on /v1/messages so
// its SDKs raise their own typed errors.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type     string     `json:"type"`
		Message  string     `json:"message"`
		Code     string     `json:"code"`
		Tollgate *limitInfo `json:"tollgate,omitempty"`
	} `json:"error"`
}

func anthropicError(r refusal) anthropicErrorBody {
	var b anthropicErrorBody
	b.Type = "error"
	b.Error.Message, b.Error.Code, b.Error.Tollgate = r.body.Message, r.body.Code, r.body.Tollgate
	switch {
	case r.anthropicType != "":
		b.Error.Type = r.anthropicType
	case r.status == http.StatusBadRequest:
		b.Error.Type = "invalid_request_error"
	case r.status == http.StatusUnauthorized:
		b.Error.Type = "authentication_error"
	case r.status == http.StatusForbidden:
		b.Error.Type = "permission_error"
	case r.status == http.StatusNotFound:
		b.Error.Type = "not_found_error"
	case r.status == http.StatusRequestEntityTooLarge:
		b.Error.Type = "request_too_large"
	case r.status == http.StatusTooManyRequests:
		b.Error.Type = "rate_limit_error"
	case r.status == http.StatusServiceUnavailable:
		b.Error.Type = "overloaded_error"
	default:
		b.Error.Type = "api_error"
	}
	return b
}

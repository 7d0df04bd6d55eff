package gateway

import (
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Request is what the sequence needs of one client request, as the HTTP
// adapter read it.
type Request struct {
	// ID names the request in logs, the ledger and its response (NewID).
	ID        string
	Principal *policy.Principal
	// Settings are the snapshot the key was found in (Gateway.Settings).
	Settings *Settings
	// Route is the gateway route (/v1/chat/completions), or a paid
	// route's prefix.
	Route string
	// Body reads the whole body, within the adapter's size and time
	// limits; its error is the request's.
	Body func() ([]byte, error)
	// User is the end user the client named in its user header, if any
	// (else the body's user field counts).
	User string
	// IP is the client's address, for limits keyed by it.
	IP string
	// Method and Target (the path, and "?" and the query if any, as
	// sent) are what a bypass signature covers, and what a paid route
	// forwards.
	Method, Target string
	// Signature is the bypass header's value, if any.
	Signature string
	// Header holds the client's headers; a few are forwarded.
	Header http.Header
}

// Call is one request on its way through the sequence: Admit fills it,
// Forward serves it, Finish settles it.
type Call struct {
	req       Request
	id        string
	principal *policy.Principal
	settings  *Settings
	route     *route
	paid      *paidRoute
	// llm is the client's request as parsed; plans are it prepared for
	// each deployment that may serve it.
	llm         *bound.Request
	plans       []*plan
	body        []byte
	estimate    budget.Amounts
	limits      []budget.Limit
	reservation *budget.Reservation
	// engine holds the reservation: the gateway's, or the local fallback.
	engine *budget.Engine
	// degraded names the mode that let the request through while the
	// store was unavailable; its spend is recorded as unreserved.
	degraded string
	start    time.Time
	// outcome is the request's result for the metrics: served, refused,
	// upstream_error, error or client_closed.
	outcome string
	// served is the deployment that answered (a fallback, maybe), with
	// the request as it was sent there.
	served *plan
	// model is the model asked for, or a paid route's name; upstream, on
	// a paid route, the upstream it goes to (an LLM request's is its
	// route's first candidate until one answers).
	model, upstream string
	// chargeReserved settles at the reservation itself (no usable usage);
	// drained says the usage was read after the client left. abandoned
	// names why the gateway stopped listening to the attempt before its
	// answer's end, if it did (exchange.cause, causeConnection,
	// causeOverrun).
	chargeReserved bool
	drained        bool
	abandoned      string
	// earlier are attempts abandoned before this one was sent (a failover
	// after a timeout): each may be billed, and is settled at its own
	// reservation.
	earlier []abandonedAttempt
	// retryRefused says the attempt after an abandoned one did not fit:
	// nothing but the abandoned attempts is settled.
	retryRefused bool
	// bypass names who skipped the limits (a signing service, or an
	// unlimited key).
	bypass string
	// user is the end user the request was made for, if named.
	user string
	// reservedAt is when the budgets were charged: the time of the
	// request's ledger entry, so the entry falls in the period its spend
	// was charged to even when the answer ends in the next one.
	reservedAt time.Time
	// reserved is the store's answer to the reservation: each budget's
	// settled spend and pending then, for the alerts at settlement.
	reserved budget.Result
	// clamped says the output cap was lowered to fit a budget.
	clamped *Clamp
	// intn draws the numbers that order an alias's deployments.
	intn func(n int) int

	// What Forward found, for Finish: whether an upstream served the
	// request, with what usage (LLM) or units (paid).
	usage    budget.Usage
	ok       bool
	units    int64
	reported bool
	// On a paid route: the most units the request allows (what it is
	// reserved for), the URL it goes to, the answer's status.
	unitsBound int64
	paidTarget string
	status     int

	// Room for what most requests make one of — a plan (one deployment),
	// an attempt, the settlement's context —, allocated with the Call
	// rather than each apart (each allocation some 250 instructions, at
	// every request). Each is used once; a second of its kind (another
	// deployment, a retry) is allocated.
	plan0     plan
	plans0    [1]*plan
	attempt0  attempt
	settleCtx lazyDeadline
}

// abandonedAttempt is an attempt the gateway stopped listening to before
// the upstream answered, after the request may have reached it (a
// first-byte timeout, a connection lost), and that a later deployment was
// tried after: it keeps its reservation, and is charged it.
type abandonedAttempt struct {
	plan     *plan
	cause    string
	held     held
	estimate budget.Amounts
}

// held is a reservation, the engine that holds it (the gateway's, or the
// local fallback) and when it was made; r is nil when nothing was
// reserved (a bypass, a store unavailable and failing open).
type held struct {
	r      *budget.Reservation
	engine *budget.Engine
	at     time.Time
}

// held is cl's reservation as it stands.
func (cl *Call) held() held { return held{cl.reservation, cl.engine, cl.reservedAt} }

// settlement names how the call's last attempt is settled, for the
// ledger: "reported" (the upstream's usage), "drained" (the same, read
// after the client left), "reservation" (no usable usage: its whole
// reservation), "" (nothing reached an upstream, or it answered with a
// failure it does not bill).
func (cl *Call) settlement() string {
	switch {
	case cl.chargeReserved:
		return SettledAtReservation
	case !cl.ok:
		return ""
	case cl.drained:
		return SettledDrained
	}
	return SettledReported
}

// How an attempt is settled (budget.Entry.Settlement).
const (
	SettledReported      = "reported"
	SettledDrained       = "drained"
	SettledAtReservation = "reservation"
)

// Clamp is an output cap the gateway lowered so that a request fits a
// budget (the budget's clamp_min_output_tokens allows it).
type Clamp struct {
	Field              string
	Granted, Requested int64
}

// ID is the request's id.
func (cl *Call) ID() string { return cl.id }

// Principal is the key the request came with.
func (cl *Call) Principal() *policy.Principal { return cl.principal }

// Limits are the limits the request was reserved against, in order.
func (cl *Call) Limits() []budget.Limit { return cl.limits }

// Reserved is the store's answer to the reservation: each limit's status.
func (cl *Call) Reserved() budget.Result { return cl.reserved }

// Clamped is the output cap lowered to fit a budget, or nil.
func (cl *Call) Clamped() *Clamp { return cl.clamped }

// Outcome is how the request ended, for the metrics: served, refused,
// upstream_error, error or client_closed.
func (cl *Call) Outcome() string { return cl.outcome }

// Model is the priced, configured model the request asked for; empty
// until it is known, and on a paid route.
func (cl *Call) Model() string {
	if cl.route == nil {
		return ""
	}
	return cl.model
}

// Team is the team of the request's key.
func (cl *Call) Team() string { return cl.principal.Team }

// entry is the ledger entry of cl as far as it is known before the
// upstream answers: what the sweeper records if it is never settled.
func (cl *Call) entry() *budget.Entry {
	e := &budget.Entry{Time: cl.reservedAt, RequestID: cl.id, Org: cl.principal.Org, Team: cl.principal.Team, Key: cl.principal.Key,
		User: cl.user, Route: cl.req.Route, Model: cl.model, Cost: cl.estimate.Cost, Reserved: cl.estimate.Cost,
		ReservedTokens: cl.estimate.Tokens, Usage: budget.Usage{Estimated: true}, Served: true, Bypass: cl.bypass, Upstream: cl.upstream}
	if len(cl.plans) > 0 {
		e.Upstream = cl.plans[0].dep.target.name
	}
	return e
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/policy"
)

// ceilingChange is the body of PUT /admin/v1/ceilings: a team budget (an
// org's, without team; a key's, with key) by name, its new amount — µ$ or
// "$1200", or relative to the amount in force ("+$100", "-$50") — or
// "reset" to go back to the configured one — for good, or until an RFC 3339
// time or for a duration ("72h"), after which what was in force before it
// is back (an earlier run-time change still lasting, else the configured
// amount). "freeze" sets it to zero until "unfreeze", which brings back
// what was in force before the freeze.
type ceilingChange struct {
	Org    string `json:"org"`
	Team   string `json:"team"`
	Key    string `json:"key"`
	Name   string `json:"name"`
	Amount string `json:"amount"`
	Until  string `json:"until"`
	For    string `json:"for"`
	// From schedules the change: it takes effect then (RFC 3339, or
	// "period_end": when the budget's current period ends), and the amount
	// in force stays until then.
	From string `json:"from"`
	// Confirm goes ahead with a cut below the period's spend or by more
	// than half, or a period reset, which are otherwise refused with
	// confirmation_required.
	Confirm bool `json:"confirm"`
	// Reason is why, kept in the audit trail (and the statement): a
	// period reset needs one.
	Reason string `json:"reason"`
}

// expiry reads a change's until or for: zero for a permanent change.
func (req ceilingChange) expiry(now time.Time) (time.Time, bool) {
	switch {
	case req.Until != "" && req.For != "", req.Amount == "reset" && (req.Until != "" || req.For != ""):
		return time.Time{}, false
	case req.Until != "":
		t, err := time.Parse(time.RFC3339, req.Until)
		return t, err == nil && t.After(now)
	case req.For != "":
		d, err := time.ParseDuration(req.For)
		return now.Add(d), err == nil && d > 0
	}
	return time.Time{}, true
}

// Refusal is an admin action refused: its status, machine-readable code,
// words and, for a change that needs confirming, the figures.
type Refusal struct {
	Status  int
	Code    string
	Message string
	Detail  map[string]any
}

func (r *Refusal) Error() string { return r.Message }

func refuse(status int, code, msg string) *Refusal {
	return &Refusal{Status: status, Code: code, Message: msg}
}

// answer writes err as the JSON API answers: a Refusal as its error body,
// anything else to Echo (500).
func answer(c echo.Context, err error) error {
	var r *Refusal
	if !errors.As(err, &r) {
		return err
	}
	body := map[string]any{"message": r.Message, "type": "admin_error", "code": r.Code}
	for k, v := range r.Detail {
		body[k] = v
	}
	return c.JSON(r.Status, map[string]any{"error": body})
}

// CeilingResult is a ceiling change as done: the amounts in force before
// and after, what is left, when a temporary change lapses.
type CeilingResult struct {
	Budget    string     `json:"budget"`
	Unit      string     `json:"unit"`
	Old       int64      `json:"old"`
	New       int64      `json:"new"`
	Remaining int64      `json:"remaining"`
	Until     *time.Time `json:"until"`
	// Scheduled is the amount a scheduled change brings From on.
	Scheduled *int64     `json:"scheduled,omitempty"`
	From      *time.Time `json:"from,omitempty"`
}

// ChangeCeiling sets (or puts back) a budget's amount for who: validated,
// confirmed where it must be, applied, audited. The API and the page both
// call it.
func (a *API) ChangeCeiling(ctx context.Context, who string, req ceilingChange) (CeilingResult, error) {
	if req.Org == "" || req.Name == "" || req.Amount == "" {
		return CeilingResult{}, refuse(http.StatusBadRequest, "bad_request", "Send {org, team, name, amount}.")
	}
	l, ok := a.findBudget(req.Org, req.Team, req.Key, req.Name)
	if !ok {
		return CeilingResult{}, refuse(http.StatusNotFound, "not_found", "No such budget.")
	}
	old, err := a.engine.Peek(ctx, []budget.Limit{l})
	if err != nil {
		return CeilingResult{}, err
	}
	switch req.Amount {
	case "freeze":
		if req.Until != "" || req.For != "" {
			return CeilingResult{}, refuse(http.StatusBadRequest, "bad_expiry", "A freeze lasts until it is unfrozen: send it without until or for.")
		}
		return a.freeze(ctx, who, l, old[0], req)
	case "unfreeze":
		return a.unfreeze(ctx, who, l, old[0], req)
	}
	// A relative amount ("+$100", "-$50") is added to the amount in force
	// now: a top-up without working out the figure.
	sign, text := int64(0), req.Amount
	if strings.HasPrefix(text, "+") || strings.HasPrefix(text, "-") {
		sign, text = map[byte]int64{'+': 1, '-': -1}[text[0]], strings.TrimSpace(text[1:])
	}
	amount := int64(-1)
	switch {
	case req.Amount == "reset":
	case l.Unit == budget.Microdollars:
		// Dollars as people write them; a bare integer is refused, since
		// "1200" meant $1,200 to whoever typed it and 1,200 µ$ here.
		v, err := config.ParseUSD(text)
		if err != nil {
			return CeilingResult{}, refuse(http.StatusBadRequest, "bad_amount", "amount: "+err.Error()+`; or "reset".`)
		}
		amount = v
	default:
		v, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 10, 64)
		if err != nil || v < 0 {
			return CeilingResult{}, refuse(http.StatusBadRequest, "bad_amount", "amount: a "+l.Unit.String()+` budget takes a whole number, or "reset".`)
		}
		amount = v
	}
	if sign != 0 {
		if amount = old[0].Capacity + sign*amount; amount < 0 {
			return CeilingResult{}, refuse(http.StatusBadRequest, "bad_amount", fmt.Sprintf("amount: %s would take %s below zero (%s in force)", req.Amount, l.Name, l.Format(old[0].Capacity)))
		}
	}
	if req.Until == "period_end" {
		// Until the budget's current period ends, on its own calendar.
		req.Until = budget.PeriodEnd(l.Period, a.now(), l.Location).UTC().Format(time.RFC3339Nano)
	}
	if req.From != "" {
		return a.schedule(ctx, who, l, old[0], amount, req)
	}
	until, ok := req.expiry(a.now())
	until = until.Truncate(time.Microsecond) // what the stores keep, so every view shows the same instant
	if !ok {
		return CeilingResult{}, refuse(http.StatusBadRequest, "bad_expiry", `Give at most one of until (RFC 3339, in the future, or "period_end") and for (a duration such as "72h"), and neither with "reset".`)
	}
	target := amount
	if target < 0 {
		target = l.Amount
	}
	if r := needsConfirming(l, old[0], target); r != nil && !req.Confirm {
		return CeilingResult{}, r
	}
	if err := a.engine.SetCeiling(ctx, l, amount, until); err != nil {
		return CeilingResult{}, err
	}
	now, err := a.engine.Peek(ctx, []budget.Limit{l})
	if err != nil {
		return CeilingResult{}, err
	}
	change := auditEntry{Time: a.now().UTC(), Who: who, Action: "set_ceiling", Target: l.Bucket, Old: old[0].Capacity, New: now[0].Capacity, Reason: strings.TrimSpace(req.Reason)}
	if !until.IsZero() {
		u := until.UTC()
		change.Until = &u
	}
	if err := a.record(ctx, change); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return CeilingResult{}, err
	}
	return CeilingResult{Budget: l.Bucket, Unit: l.Unit.String(), Old: old[0].Capacity, New: now[0].Capacity, Remaining: now[0].Remaining, Until: change.Until}, nil
}

// schedule makes amount l's ceiling from req.From on: the amount in force
// stays until then. Not over a temporary change (the schedule would have
// to sit between it and what it lapses to).
func (a *API) schedule(ctx context.Context, who string, l budget.Limit, was budget.Status, amount int64, req ceilingChange) (CeilingResult, error) {
	if amount < 0 || req.Until != "" || req.For != "" {
		return CeilingResult{}, refuse(http.StatusBadRequest, "bad_schedule", `A scheduled change takes an amount and from (RFC 3339, or "period_end"), without until or for, and not "reset".`)
	}
	from := budget.PeriodEnd(l.Period, a.now(), l.Location)
	if req.From != "period_end" {
		t, err := time.Parse(time.RFC3339, req.From)
		if err != nil || !t.After(a.now()) {
			return CeilingResult{}, refuse(http.StatusBadRequest, "bad_schedule", `from: an RFC 3339 time in the future, or "period_end".`)
		}
		from = t
	}
	from = from.Truncate(time.Microsecond).UTC()
	ok, err := a.engine.Schedule(ctx, l, amount, from)
	if err != nil {
		return CeilingResult{}, err
	}
	if !ok {
		_, until, _, _ := a.engine.Override(ctx, l)
		return CeilingResult{}, refuse(http.StatusConflict, "temporary_change_in_force",
			fmt.Sprintf("A temporary change of %s is in force until %s: schedule once it has lapsed, or set the new amount for good.", l.Name, until.UTC().Format(time.RFC3339)))
	}
	change := auditEntry{Time: a.now().UTC(), Who: who, Action: "schedule_ceiling", Target: l.Bucket, Old: was.Capacity, New: amount,
		Reason: strings.TrimSpace(req.Reason), From: &from}
	if err := a.record(ctx, change); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return CeilingResult{}, err
	}
	return CeilingResult{Budget: l.Bucket, Unit: l.Unit.String(), Old: was.Capacity, New: was.Capacity, Remaining: was.Remaining,
		Scheduled: &amount, From: &from}, nil
}

// frozenUntil is when a freeze lapses: never, in practice. A freeze is a
// temporary change of zero that lasts until it is unfrozen, so the store
// keeps what was in force before it to come back then.
var frozenUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// isFrozen tells a freeze among the run-time changes: zero, until
// frozenUntil.
func isFrozen(amount int64, until time.Time) bool { return amount == 0 && until.Equal(frozenUntil) }

// freeze sets l to zero until unfrozen: confirmed (it cuts below what is
// used), audited with its reason.
func (a *API) freeze(ctx context.Context, who string, l budget.Limit, was budget.Status, req ceilingChange) (CeilingResult, error) {
	if amount, until, ok, err := a.engine.Override(ctx, l); err != nil {
		return CeilingResult{}, err
	} else if ok && isFrozen(amount, until) {
		return CeilingResult{}, refuse(http.StatusConflict, "already_frozen", l.Name+" is frozen already.")
	}
	if r := needsConfirming(l, was, 0); r != nil && !req.Confirm {
		return CeilingResult{}, r
	}
	if err := a.engine.SetCeiling(ctx, l, 0, frozenUntil); err != nil {
		return CeilingResult{}, err
	}
	return a.changed(ctx, who, l, was, "freeze", req.Reason, nil)
}

// unfreeze ends a freeze: what was in force before it is back.
func (a *API) unfreeze(ctx context.Context, who string, l budget.Limit, was budget.Status, req ceilingChange) (CeilingResult, error) {
	amount, until, ok, err := a.engine.Override(ctx, l)
	if err != nil {
		return CeilingResult{}, err
	}
	if !ok || !isFrozen(amount, until) {
		return CeilingResult{}, refuse(http.StatusConflict, "not_frozen", l.Name+" is not frozen.")
	}
	if _, err := a.engine.Lapse(ctx, l); err != nil {
		return CeilingResult{}, err
	}
	var back *time.Time
	if _, u, ok, err := a.engine.Override(ctx, l); err == nil && ok && !u.IsZero() {
		back = &u
	}
	return a.changed(ctx, who, l, was, "unfreeze", req.Reason, back)
}

// changed audits a change of l made by who and answers it.
func (a *API) changed(ctx context.Context, who string, l budget.Limit, was budget.Status, action, reason string, until *time.Time) (CeilingResult, error) {
	now, err := a.engine.Peek(ctx, []budget.Limit{l})
	if err != nil {
		return CeilingResult{}, err
	}
	change := auditEntry{Time: a.now().UTC(), Who: who, Action: action, Target: l.Bucket, Old: was.Capacity, New: now[0].Capacity,
		Reason: strings.TrimSpace(reason), Until: until}
	if err := a.record(ctx, change); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return CeilingResult{}, err
	}
	return CeilingResult{Budget: l.Bucket, Unit: l.Unit.String(), Old: was.Capacity, New: now[0].Capacity, Remaining: now[0].Remaining, Until: until}, nil
}

// needsConfirming is the refusal of a cut that must be confirmed — below
// what the period has already spent or reserved (every request would be
// refused until it ends), or by more than half (a slip of a digit) — or
// nil. Raises and small cuts go through.
func needsConfirming(l budget.Limit, s budget.Status, target int64) *Refusal {
	used := s.Used()
	var why string
	switch {
	case target >= s.Capacity:
		return nil
	case target < used:
		why = fmt.Sprintf("below the %s already spent or reserved this period: every request is refused until the period ends", l.Format(used))
	case target*2 < s.Capacity:
		why = "by more than half"
	default:
		return nil
	}
	r := refuse(http.StatusConflict, "confirmation_required",
		fmt.Sprintf("This cuts %s from %s to %s, %s. Send it again with \"confirm\": true (tollgate ceiling set --yes) to go ahead.", l.Name, l.Format(s.Capacity), l.Format(target), why))
	r.Detail = map[string]any{"old": s.Capacity, "new": target, "used": used, "unit": l.Unit.String()}
	return r
}

func (a *API) setCeiling(c echo.Context) error {
	var req ceilingChange
	if err := c.Bind(&req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_request", "Send {org, team, name, amount}.")
	}
	res, err := a.ChangeCeiling(c.Request().Context(), caller(c).Name, req)
	if err != nil {
		return answer(c, err)
	}
	return c.JSON(http.StatusOK, res)
}

// ResetResult is a period started over.
type ResetResult struct {
	Budget      string `json:"budget"`
	Unit        string `json:"unit"`
	Period      string `json:"period"`
	SpentBefore int64  `json:"spent_before"`
	Remaining   int64  `json:"remaining"`
}

// ResetPeriod starts a budget's current period over at zero settled spend
// (reservations in flight keep their claim), for who. Audited with the
// spend it had; the ledger and reports keep every settlement.
func (a *API) ResetPeriod(ctx context.Context, who string, req ceilingChange) (ResetResult, error) {
	if req.Org == "" || req.Name == "" {
		return ResetResult{}, refuse(http.StatusBadRequest, "bad_request", "Send {org, team, name}.")
	}
	l, ok := a.findBudget(req.Org, req.Team, req.Key, req.Name)
	if !ok {
		return ResetResult{}, refuse(http.StatusNotFound, "not_found", "No such budget.")
	}
	reason := strings.TrimSpace(req.Reason)
	if !req.Confirm || reason == "" {
		// A reset lets the budget be spent whole again this period: a
		// second ceiling's worth, which a click must not do unasked.
		st, err := a.engine.Peek(ctx, []budget.Limit{l})
		if err != nil {
			return ResetResult{}, err
		}
		r := refuse(http.StatusConflict, "confirmation_required",
			fmt.Sprintf("Starting %s's period over lets it spend its whole %s again this period, on top of the %s settled so far (which the ledger and reports keep). Send it again with \"confirm\": true and a \"reason\"; the reset is listed in the audit trail and in the month's statement.",
				l.Name, l.Format(st[0].Capacity), l.Format(st[0].Spent)))
		r.Detail = map[string]any{"ceiling": st[0].Capacity, "spent": st[0].Spent, "unit": l.Unit.String(), "reason_required": reason == ""}
		return ResetResult{}, r
	}
	period, was, err := a.engine.ResetSpent(ctx, l)
	if err != nil {
		return ResetResult{}, err
	}
	// The period's alerts fire again as spend climbs back.
	if err := a.engine.Unclaim(ctx, l.Partition, policy.AlertClaims(l, period, a.config().Alerts.Thresholds)...); err != nil {
		return ResetResult{}, err
	}
	if err := a.record(ctx, auditEntry{Time: a.now().UTC(), Who: who, Action: "reset_period", Target: l.Bucket + ":" + period,
		Old: was, New: 0, Reason: reason}); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return ResetResult{}, err
	}
	st, err := a.engine.Peek(ctx, []budget.Limit{l})
	if err != nil {
		return ResetResult{}, err
	}
	return ResetResult{Budget: l.Bucket, Unit: l.Unit.String(), Period: period, SpentBefore: was, Remaining: st[0].Remaining}, nil
}

// resetPeriod answers POST /admin/v1/ceilings/reset {org, team, name,
// confirm, reason}.
func (a *API) resetPeriod(c echo.Context) error {
	var req ceilingChange
	if err := c.Bind(&req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_request", "Send {org, team, name}.")
	}
	res, err := a.ResetPeriod(c.Request().Context(), caller(c).Name, req)
	if err != nil {
		return answer(c, err)
	}
	return c.JSON(http.StatusOK, res)
}

// findBudget locates a configured budget limit of an org, a team or a key.
func (a *API) findBudget(org, team, key, name string) (budget.Limit, bool) {
	limits, _, _ := a.budgets(org, team, key)
	for _, l := range limits {
		if l.Name == name {
			return l, true
		}
	}
	return budget.Limit{}, false
}

// budgets lists the budget limits of an org (team and key empty), of one
// of its teams, or of one key (team, if given, must be the key's), compiled
// as the request path compiles them, with the team they belong to (the
// key's, for a key); false if there is no such org, team or key.
func (a *API) budgets(org, team, key string) ([]budget.Limit, string, bool) {
	var limits []budget.Limit
	ok := false
	if key == "" {
		limits, ok = policy.ScopeLimits(a.config(), org, team)
	} else {
		var runtime []policy.RuntimeKey
		if a.keys != nil {
			runtime = a.keys.RuntimeKeys()
		}
		var keyTeam string
		limits, keyTeam, ok = policy.KeyLimits(a.config(), org, key, runtime)
		if ok && team != "" && team != keyTeam {
			return nil, "", false
		}
		team = keyTeam
	}
	return slices.DeleteFunc(limits, func(l budget.Limit) bool { return l.Kind != budget.Ceiling }), team, ok
}

// CeilingView is one budget as GET /admin/v1/ceilings shows it.
type CeilingView struct {
	Budget     string `json:"budget"`
	Name       string `json:"name"`
	Unit       string `json:"unit"`
	Period     string `json:"period"`
	TimeZone   string `json:"time_zone"`
	Configured int64  `json:"configured"`
	InForce    int64  `json:"in_force"`
	Overridden bool   `json:"overridden"`
	// OverrideUntil is when a temporary override lapses.
	OverrideUntil *time.Time `json:"override_until,omitempty"`
	// Frozen: the change in force is a freeze, until unfrozen.
	Frozen bool `json:"frozen"`
	// Used is the period's settled spend plus what reservations in
	// flight hold, as it is: past InForce when the spend went past the
	// ceiling (an upstream billed more than was reserved, or the ceiling
	// was cut below it), where Remaining stops at zero.
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	ResetsAt  time.Time `json:"resets_at"`
}

// ceilings answers GET /admin/v1/ceilings?org=O[&team=T][&key=K]: every
// budget of the org (or of one team, or one key) with its configured amount, the amount in force
// (a run-time ceiling, if one is set), what is used (settled and reserved
// spend, past the ceiling if it went there), what is left and when the
// period ends, in the budget's time zone. Spend by team, model or key is
// read from /reports, which the ledger backs. A viewer sees only its own
// teams; any other is a uniform 404.
func (a *API) ceilings(c echo.Context) error {
	org, team, key := c.QueryParam("org"), c.QueryParam("team"), c.QueryParam("key")
	if org == "" {
		return fail(c, http.StatusBadRequest, "bad_request", "Give ?org= (and &team= for a team's budgets, &key= for a key's).")
	}
	limits, team, ok := a.budgets(org, team, key)
	if !ok || !sees(caller(c), org, team) {
		return fail(c, http.StatusNotFound, "not_found", "No such org, team or key.")
	}
	out, err := a.ceilingViews(c.Request().Context(), limits)
	if err != nil {
		return err
	}
	view := map[string]any{"org": org, "team": team, "budgets": out}
	if key != "" {
		view["key"] = key
	}
	return c.JSON(http.StatusOK, view)
}

// ceilingViews are limits as GET /admin/v1/ceilings shows them.
func (a *API) ceilingViews(ctx context.Context, limits []budget.Limit) ([]CeilingView, error) {
	statuses, err := a.engine.Peek(ctx, limits)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]CeilingView, len(limits))
	for i, l := range limits {
		s := statuses[i]
		amount, until, overridden, err := a.engine.Override(ctx, l)
		if err != nil {
			return nil, err
		}
		out[i] = CeilingView{Budget: l.Bucket, Name: l.Name, Unit: l.Unit.String(), Period: l.Period.String(), TimeZone: l.Location.String(),
			Configured: l.Amount, InForce: s.Capacity, Overridden: overridden, Frozen: overridden && isFrozen(amount, until),
			Used: s.Used(), Remaining: s.Remaining, ResetsAt: now.Add(s.ResetAfter).Round(time.Second).In(l.Location)}
		if !until.IsZero() && !out[i].Frozen {
			u := until.UTC()
			out[i].OverrideUntil = &u
		}
	}
	return out, nil
}

package policy

import (
	"fmt"
	"slices"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// Charge is one budget a ledger entry's spend went to, and how much, in
// the budget's unit.
type Charge struct {
	Limit  budget.Limit
	Amount int64
}

// Charges maps ledger entries back to the budgets and meters the
// request path charged them to, with the buckets, units, plans, time zones,
// key_by and shards of the config it was built from: what rebuilding
// counters from the ledger needs.
type Charges struct {
	byKey      map[[2]string]*Principal // org, key id
	routeCosts map[string]int64
}

// NewCharges compiles c's keys and the run-time ones (revoked keys too:
// their spend this period still counts).
func NewCharges(c *config.Config, runtime []RuntimeKey) (*Charges, error) {
	d, err := NewDirectory(c, nil)
	if err != nil {
		return nil, err
	}
	all := slices.Clone(runtime)
	for i := range all {
		all[i].RevokedAt = nil
	}
	rd, err := CompileKeys(c, all)
	if err != nil {
		return nil, err
	}
	ch := &Charges{byKey: map[[2]string]*Principal{}, routeCosts: c.RouteCosts}
	for _, dir := range []*Directory{d, rd} {
		for _, p := range dir.byHash {
			ch.byKey[[2]string{p.Org, p.Key}] = p
		}
	}
	return ch, nil
}

// Of returns the budgets e was charged to. An entry that charged nothing
// (not served) has none. Limits split by client IP cannot be rebuilt —
// the ledger does not keep addresses — and are named in skipped; so is an
// entry whose key is no longer configured.
func (ch *Charges) Of(e budget.Entry) (charges []Charge, skipped []string) {
	if !e.Served {
		return nil, nil
	}
	p, ok := ch.byKey[[2]string{e.Org, e.Key}]
	if !ok {
		return nil, []string{fmt.Sprintf("key %s/%s (not in the config)", e.Org, e.Key)}
	}
	requests := int64(1)
	if n, ok := ch.routeCosts[e.Route]; ok {
		requests = n
	}
	tokens := e.Usage.TotalTokens()
	if e.Outcome == budget.Expired.String() {
		tokens = e.ReservedTokens // the sweeper charged the reservation
	}
	amounts := budget.Amounts{Tokens: tokens, Requests: requests, Cost: e.Cost}
	k := RequestKey{User: e.User, Model: e.Model, Route: e.Route, ID: e.RequestID}
	for pl := range p.policyLimits(k) {
		if pl.limit.Kind != budget.Ceiling && pl.limit.Kind != budget.Meter {
			continue
		}
		if slices.Contains(pl.keyBy, "ip") {
			skipped = append(skipped, pl.limit.Bucket)
			continue
		}
		if l, ok := pl.resolve(k, p.slots); ok {
			charges = append(charges, Charge{Limit: l, Amount: amounts.Of(l.Unit)})
		}
	}
	return charges, skipped
}

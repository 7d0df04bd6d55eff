// Package policy is who pays for what: the config turned into a directory
// of principals (API keys with their org, team, models and limits), the
// limits that apply to one request and the buckets they charge (the one
// place a bucket key is built), the spend meters and alert claims beside
// them, the run-time keys with their registry interface, and the charges
// a ledger entry made. It knows nothing of HTTP: the gateway, the admin
// API, the key registries and the ledger reseed all read it.
package policy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"iter"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// Principal is one API key with everything resolved: its org and team, the
// models it may use and the limits that apply to it. Plans are expanded once,
// when the config is loaded, never per request.
type Principal struct {
	Org, Team, Key string
	hash           [32]byte
	models         map[string]bool // nil: every configured model
	// fixed applies to every request: org, team and key limits.
	fixed []policyLimit
	// perUser and perModel are templates completed with the request's user
	// or model.
	perUser  []config.Limit
	perModel map[string][]config.Limit
	loc      *time.Location
	// unlimited keys are never refused by a limit (counted as bypasses).
	unlimited bool
	slots     int64 // config.ShardSlots
	// byModel keeps modelLimits' answers.
	byModel *modelLimits
}

// Unlimited reports whether the key is never refused by a limit.
func (p *Principal) Unlimited() bool { return p.unlimited }

// Location is the calendar the key's budgets reset on.
func (p *Principal) Location() *time.Location { return p.loc }

// Allows reports whether the key may use model.
func (p *Principal) Allows(model string) bool { return p.models == nil || p.models[model] }

// policyLimit is a compiled limit and how a request picks its bucket.
type policyLimit struct {
	limit     budget.Limit
	keyBy     []string
	endpoints []string
	shards    int64
}

// RequestKey is what a request's limits are selected and keyed by.
type RequestKey struct {
	User, Model, IP, Route, ID string
}

func wrap(l config.Limit, b budget.Limit) policyLimit {
	return policyLimit{limit: b, keyBy: l.KeyBy, endpoints: l.Endpoints, shards: l.Shards}
}

// resolve returns the limit's bucket for one request, or false when the
// limit does not apply to the request's route. A sharded limit's shard
// keeps its state in shard i mod slots of the partition
// (config.ShardSlots).
func (pl *policyLimit) resolve(k RequestKey, slots int64) (budget.Limit, bool) {
	if len(pl.endpoints) > 0 && !slices.Contains(pl.endpoints, k.Route) {
		return budget.Limit{}, false
	}
	l := pl.limit
	for _, by := range pl.keyBy {
		var v string
		switch by {
		case "ip":
			v = k.IP
		case "endpoint":
			v = k.Route
		case "user":
			v = k.User
		}
		if v == "" {
			v = "-"
		}
		l.Bucket += "|" + by + "=" + url.PathEscape(v)
	}
	if pl.shards > 1 {
		h := fnv.New32a()
		h.Write([]byte(k.ID))
		i := uint64(h.Sum32()) % uint64(pl.shards)
		l.Bucket += "#" + strconv.FormatUint(i, 10)
		if slots > 1 {
			l.Shard = int(i%uint64(slots)) + 1
		}
		l.Amount = max(1, l.Amount/pl.shards)
		if l.Burst > 0 {
			l.Burst = max(1, l.Burst/pl.shards)
		}
	}
	return l, true
}

// Limits returns every limit that applies to one request by this key. The
// slice may be shared with other requests: callers must not change it (a
// caller that needs other limits makes a new slice).
func (p *Principal) Limits(k RequestKey) []budget.Limit {
	if len(p.perUser) == 0 {
		if out, ok := p.byModel.resolved(p, k.Model); ok {
			return out
		}
	}
	return p.resolve(k)
}

func (p *Principal) resolve(k RequestKey) []budget.Limit {
	out := make([]budget.Limit, 0, len(p.fixed)+len(p.perUser)+2)
	for pl := range p.policyLimits(k) {
		if l, ok := pl.resolve(k, p.slots); ok {
			out = append(out, l)
		}
	}
	return out
}

// constant reports whether pl resolves to the same limit for every
// request: it applies to every route and takes its bucket from nothing of
// the request.
func (pl *policyLimit) constant() bool {
	return len(pl.endpoints) == 0 && len(pl.keyBy) == 0 && pl.shards <= 1
}

// policyLimits are the key's limits completed with the request's user and
// model, before each picks its bucket: the compiled ones in place, not
// copied.
func (p *Principal) policyLimits(k RequestKey) iter.Seq[*policyLimit] {
	return func(yield func(*policyLimit) bool) {
		for _, pls := range [][]policyLimit{p.fixed, p.userLimits(k.User), p.modelLimits(k.Model)} {
			for i := range pls {
				if !yield(&pls[i]) {
					return
				}
			}
		}
	}
}

// userLimits are the per-user limits of a request by user.
func (p *Principal) userLimits(user string) []policyLimit {
	if len(p.perUser) == 0 {
		return nil
	}
	if user == "" {
		user = "-" // requests that name no user share one bucket
	}
	out := make([]policyLimit, len(p.perUser))
	for i, l := range p.perUser {
		out[i] = wrap(l, compileLimit(l, budget.ScopeUser, bucketPath(p.Org, p.Team, user), p.loc))
	}
	return out
}

// modelLimits are the limits model adds to a request by this key: its
// per-model limits and spend meters. They are compiled once per model:
// escaping and joining their bucket names cost more than the rest of the
// key's limits.
func (p *Principal) modelLimits(model string) []policyLimit {
	if model == "" {
		return nil
	}
	c := p.byModel
	c.mu.RLock()
	pls, ok := c.m[model]
	c.mu.RUnlock()
	if ok {
		return pls
	}
	for _, l := range p.perModel[model] {
		pls = append(pls, wrap(l, compileLimit(l, budget.ScopeModel, bucketPath(p.Org, p.Team, model), p.loc)))
	}
	for _, m := range p.Meters(model) {
		pls = append(pls, policyLimit{limit: m})
	}
	c.mu.Lock()
	if len(c.m) < maxModelsKept {
		c.m[model] = pls
	}
	c.mu.Unlock()
	return pls
}

// maxModelsKept bounds a key's compiled model limits (the models a key
// may name are the configured ones; this guards against any other).
const maxModelsKept = 256

type modelLimits struct {
	mu sync.RWMutex
	m  map[string][]policyLimit
	// made are a request's limits for a model, where no limit of the
	// key reads anything of the request but its model: made once (nil
	// where one does).
	made map[string][]budget.Limit
}

// resolved returns the limits of every request by p for model, made once,
// where none of them depends on anything else of the request (ok false
// where one does).
func (c *modelLimits) resolved(p *Principal, model string) ([]budget.Limit, bool) {
	c.mu.RLock()
	out, ok := c.made[model]
	c.mu.RUnlock()
	if ok {
		return out, out != nil
	}
	k := RequestKey{Model: model}
	for pl := range p.policyLimits(k) {
		if !pl.constant() {
			c.keep(model, nil) // nil: not constant
			return nil, false
		}
	}
	out = p.resolve(k)
	c.keep(model, out)
	return out, true
}

func (c *modelLimits) keep(model string, limits []budget.Limit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		c.made = map[string][]budget.Limit{}
	}
	if len(c.made) < maxModelsKept {
		c.made[model] = limits
	}
}

// Spend meters: every request is also charged, in µ$, to its key × model
// meter (budget.Meter) for the day and the month on the org's calendar, so
// the store holds current spend per period × org × team × key × model
// whatever budgets are configured. A meter never refuses, is never
// advertised and never alerts; it is counted in the same atomic step that
// settles the request's budgets.
const meterPrefix = "spend:"

// Meters are the key's spend meters for model.
func (p *Principal) Meters(model string) []budget.Limit {
	path := bucketPath(p.Org, p.Team, p.Key, model)
	mk := func(period budget.Period, name string) budget.Limit {
		return budget.Limit{Bucket: meterPrefix + path + ":" + name, Name: name, Partition: p.Org, Scope: budget.ScopeKey,
			Kind: budget.Meter, Unit: budget.Microdollars, Period: period, Location: p.loc}
	}
	return []budget.Limit{mk(budget.Day, "spend-day"), mk(budget.Month, "spend-month")}
}

// Directory finds a Principal by the key a client presented.
type Directory struct {
	byHash map[[32]byte]*Principal
}

// HashKey is how keys are stored: "sha256:<hex>" of the plain key.
func HashKey(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Lookup finds the principal of a plain key.
func (d *Directory) Lookup(plain string) (*Principal, bool) {
	sum := sha256.Sum256([]byte(plain))
	p, ok := d.byHash[sum]
	if !ok {
		return nil, false
	}
	// The map look-up found it by hash; compare in constant time anyway so
	// that no code path ever compares key material byte by byte.
	if subtle.ConstantTimeCompare(p.hash[:], sum[:]) != 1 {
		return nil, false
	}
	return p, true
}

// NewDirectory resolves every key of c: the config's own, or (extra not
// nil) only the keys extra gives each org/team instead — run-time keys,
// compiled with the limits of the team they belong to.
func NewDirectory(c *config.Config, extra map[[2]string][]config.Key) (*Directory, error) {
	d := &Directory{byHash: map[[32]byte]*Principal{}}
	slots := c.ShardSlots()
	for _, o := range c.Orgs {
		loc, err := OrgLocation(c, o)
		if err != nil {
			return nil, err
		}
		orgLimits := compileLimits(o.Limits, budget.ScopeOrg, bucketPath(o.ID), loc)
		for _, t := range o.Teams {
			teamLimits := compileLimits(withPlan(c.Plans[t.Plan], t.Limits), budget.ScopeTeam, bucketPath(o.ID, t.ID), loc)
			keys := t.Keys
			if extra != nil {
				keys = extra[[2]string{o.ID, t.ID}]
			}
			for _, k := range keys {
				p := &Principal{Org: o.ID, Team: t.ID, Key: k.ID, perUser: t.UserLimits, perModel: t.ModelLimits, loc: loc, unlimited: k.Unlimited, slots: slots,
					byModel: &modelLimits{m: map[string][]policyLimit{}}}
				raw, err := hex.DecodeString(strings.TrimPrefix(k.Hash, "sha256:"))
				if err != nil || len(raw) != 32 {
					return nil, fmt.Errorf("policy: key %s/%s: bad hash", o.ID, k.ID)
				}
				copy(p.hash[:], raw)
				models := t.Models
				if len(k.Models) > 0 {
					models = k.Models
				}
				if len(models) > 0 {
					p.models = map[string]bool{}
					for _, m := range models {
						p.models[m] = true
					}
				}
				p.fixed = slices.Concat(orgLimits, teamLimits,
					compileLimits(withPlan(c.Plans[k.Plan], k.Limits), budget.ScopeKey, bucketPath(o.ID, k.ID), loc))
				d.byHash[p.hash] = p
			}
		}
	}
	return d, nil
}

// OrgLocation is an org's calendar, the one its budgets reset on: its
// time_zone, or the config's.
func OrgLocation(c *config.Config, o config.Org) (*time.Location, error) {
	if o.TimeZone != "" {
		return time.LoadLocation(o.TimeZone)
	}
	return time.LoadLocation(c.TimeZone)
}

// ScopeLimits compiles the limits of an org (team empty) or of one of its
// teams exactly as the request path does — same buckets, plan merge and
// time zones — so the admin API reads and changes the buckets requests are
// charged to. Limits split per caller (key_by) or into shards have no one
// bucket and are left out. False if there is no such org or team.
func ScopeLimits(c *config.Config, org, team string) ([]budget.Limit, bool) {
	for _, o := range c.Orgs {
		if o.ID != org {
			continue
		}
		loc, err := OrgLocation(c, o)
		if err != nil {
			return nil, false // refused when the config was loaded
		}
		var ls []policyLimit
		if team == "" {
			ls = compileLimits(o.Limits, budget.ScopeOrg, bucketPath(o.ID), loc)
		} else {
			i := slices.IndexFunc(o.Teams, func(t config.Team) bool { return t.ID == team })
			if i < 0 {
				return nil, false
			}
			t := o.Teams[i]
			ls = compileLimits(withPlan(c.Plans[t.Plan], t.Limits), budget.ScopeTeam, bucketPath(o.ID, t.ID), loc)
		}
		out := make([]budget.Limit, 0, len(ls))
		for _, l := range ls {
			if len(l.keyBy) == 0 && l.shards <= 1 {
				out = append(out, l.limit)
			}
		}
		return out, true
	}
	return nil, false
}

// KeyLimits compiles one key's own limits (not its team's or org's) as the
// request path does, for a key in the config or one of runtime (revoked
// keys included: their budgets still hold this period's spend). team is the
// key's team; false if the org has no such key. Limits split per caller or
// into shards are left out, as in ScopeLimits.
func KeyLimits(c *config.Config, org, key string, runtime []RuntimeKey) (limits []budget.Limit, team string, ok bool) {
	i := slices.IndexFunc(c.Orgs, func(o config.Org) bool { return o.ID == org })
	if i < 0 {
		return nil, "", false
	}
	o := c.Orgs[i]
	var k config.Key
	for _, t := range o.Teams {
		if j := slices.IndexFunc(t.Keys, func(k config.Key) bool { return k.ID == key }); j >= 0 {
			k, team, ok = t.Keys[j], t.ID, true
		}
	}
	if !ok {
		j := slices.IndexFunc(runtime, func(r RuntimeKey) bool { return r.Org == org && r.ID == key })
		if j < 0 {
			return nil, "", false
		}
		k, team = config.Key{ID: key, Plan: runtime[j].Plan}, runtime[j].Team
	}
	loc, err := OrgLocation(c, o)
	if err != nil {
		return nil, "", false
	}
	for _, l := range compileLimits(withPlan(c.Plans[k.Plan], k.Limits), budget.ScopeKey, bucketPath(o.ID, k.ID), loc) {
		if len(l.keyBy) == 0 && l.shards <= 1 {
			limits = append(limits, l.limit)
		}
	}
	return limits, team, true
}

// withPlan returns a plan's limits overridden by explicit limits of the same
// name, then the explicit ones.
func withPlan(plan, own []config.Limit) []config.Limit {
	out := make([]config.Limit, 0, len(plan)+len(own))
	for _, l := range plan {
		if !slices.ContainsFunc(own, func(o config.Limit) bool { return o.Name == l.Name }) {
			out = append(out, l)
		}
	}
	return append(out, own...)
}

// bucketPath joins ids into a store key prefix; ids that come from clients
// (user names, model names) are escaped so none can forge another's bucket.
func bucketPath(parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func compileLimits(ls []config.Limit, scope budget.Scope, path string, loc *time.Location) []policyLimit {
	out := make([]policyLimit, len(ls))
	for i, l := range ls {
		out[i] = wrap(l, compileLimit(l, scope, path, loc))
	}
	return out
}

func compileLimit(l config.Limit, scope budget.Scope, path string, loc *time.Location) budget.Limit {
	org, _, _ := strings.Cut(path, "/")
	b := budget.Limit{
		Bucket:    scope.String() + ":" + path + ":" + l.Name,
		Partition: org,
		Name:      l.Name,
		Scope:     scope,
		Amount:    l.Amount.Value,
		Shadow:    l.Shadow,
		ClampMin:  l.ClampMinOutputTokens,
		Burst:     l.Burst.Value,
		Window:    l.Window,
	}
	switch l.Kind {
	case "rate":
		b.Kind = budget.Rate
		// A token bucket's state is a time in units of its own rate: a
		// changed rate (a reload) starts a fresh, full bucket rather than
		// misreading the old one. Budgets keep their buckets: spend
		// survives any change of ceiling.
		b.Bucket += fmt.Sprintf("@%d/%s/%d", l.Amount.Value, l.Window, l.Burst.Value)
		switch l.Algorithm {
		case "fixed_window":
			b.Algorithm, b.Bucket = budget.FixedWindow, b.Bucket+"/fixed"
		case "sliding_window":
			b.Algorithm, b.Bucket = budget.SlidingWindow, b.Bucket+"/sliding"
		case "sliding_log":
			b.Algorithm, b.Bucket = budget.SlidingLog, b.Bucket+"/log"
		}
	case "budget":
		b.Kind = budget.Ceiling
	case "concurrency":
		b.Kind = budget.Concurrency
	}
	switch l.Unit {
	case "tokens":
		b.Unit = budget.Tokens
	case "requests":
		b.Unit = budget.Requests
	case "usd":
		b.Unit = budget.Microdollars
	}
	if l.Period == "day" {
		b.Period = budget.Day
	} else if l.Period == "month" {
		b.Period = budget.Month
	}
	b.Location = loc
	if l.TimeZone != "" {
		if own, err := time.LoadLocation(l.TimeZone); err == nil { // validated with the config
			b.Location = own
		}
	}
	return b
}

package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/policy"
)

// keySet is the run-time keys as last read, compiled against a config.
type keySet struct {
	version int64
	keys    []policy.RuntimeKey
	dir     *policy.Directory
}

// RefreshKeys reads the registry if its version moved and makes the keys
// it holds (and no revoked one) authenticate from the next request on.
func (g *Gateway) RefreshKeys(ctx context.Context) error {
	if g.keys == nil {
		return nil
	}
	v, err := g.keys.Version(ctx)
	if err != nil {
		return err
	}
	if cur := g.keySet.Load(); cur != nil && cur.version == v {
		return nil
	}
	keys, err := g.keys.List(ctx)
	if err != nil {
		return err
	}
	return g.compileKeySet(v, keys, g.settings.Load().cfg)
}

func (g *Gateway) compileKeySet(v int64, keys []policy.RuntimeKey, c *config.Config) error {
	dir, err := policy.CompileKeys(c, keys)
	if err != nil {
		return err
	}
	g.keySet.Store(&keySet{version: v, keys: keys, dir: dir})
	return nil
}

// RunKeyRefresh refreshes the run-time keys every interval until ctx is
// done: a key revoked on another instance stops working here within it.
func (g *Gateway) RunKeyRefresh(ctx context.Context, interval time.Duration) {
	tick.Every(ctx, interval, func(ctx context.Context) {
		if err := g.RefreshKeys(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("refreshing API keys: the keys last read stay in force", "err", err)
		}
	})
}

// RuntimeKeys returns the run-time keys as last read (for the reseed).
func (g *Gateway) RuntimeKeys() []policy.RuntimeKey {
	if ks := g.keySet.Load(); ks != nil {
		return ks.keys
	}
	return nil
}

// CreateKey makes a key for org/team and returns it in plain text — the
// only time it exists outside the client — with its record. models (empty:
// the team's) must be models the team may use; plan must be configured.
func (g *Gateway) CreateKey(ctx context.Context, k policy.RuntimeKey) (string, policy.RuntimeKey, error) {
	if g.keys == nil {
		return "", k, errors.New("gateway: no key registry")
	}
	c := g.settings.Load().cfg
	o := slices.IndexFunc(c.Orgs, func(o config.Org) bool { return o.ID == k.Org })
	if o < 0 {
		return "", k, policy.ErrNoTeam
	}
	ti := slices.IndexFunc(c.Orgs[o].Teams, func(t config.Team) bool { return t.ID == k.Team })
	if ti < 0 {
		return "", k, policy.ErrNoTeam
	}
	team := c.Orgs[o].Teams[ti]
	if !policy.KeyID.MatchString(k.ID) {
		return "", k, fmt.Errorf("%w: id must be 1-64 letters, digits, '.', '_' or '-'", policy.ErrBadKey)
	}
	for _, t := range c.Orgs[o].Teams {
		if slices.ContainsFunc(t.Keys, func(ck config.Key) bool { return ck.ID == k.ID }) {
			return "", k, policy.ErrKeyExists
		}
	}
	for _, m := range k.Models {
		if _, ok := c.Models[m]; !ok || (len(team.Models) > 0 && !slices.Contains(team.Models, m)) {
			return "", k, fmt.Errorf("%w: model %q is not one the team may use", policy.ErrBadKey, m)
		}
	}
	if _, ok := c.Plans[k.Plan]; k.Plan != "" && !ok {
		return "", k, fmt.Errorf("%w: no plan %q", policy.ErrBadKey, k.Plan)
	}
	plain := policy.NewKey()
	k.Hash, k.CreatedAt, k.RevokedAt, k.RevokedBy = policy.HashKey(plain), g.now().UTC().Truncate(time.Second), nil, ""
	if err := g.keys.Create(ctx, k); err != nil {
		return "", k, err
	}
	g.remember(ctx, k)
	return plain, k, nil
}

// RevokeKey revokes a run-time key: it stops working on this instance at
// once and on the others within their refresh interval.
func (g *Gateway) RevokeKey(ctx context.Context, org, id, by string) (policy.RuntimeKey, bool, error) {
	if g.keys == nil {
		return policy.RuntimeKey{}, false, policy.ErrNoKey
	}
	c := g.settings.Load().cfg
	for _, o := range c.Orgs {
		for _, t := range o.Teams {
			if o.ID == org && slices.ContainsFunc(t.Keys, func(ck config.Key) bool { return ck.ID == id }) {
				return policy.RuntimeKey{}, false, policy.ErrConfigKey
			}
		}
	}
	k, now, err := g.keys.Revoke(ctx, org, id, g.now().UTC().Truncate(time.Second), by)
	if err != nil {
		return k, false, err
	}
	g.remember(ctx, k)
	return k, now, nil
}

// remember applies a change this instance made at once — the others see
// it at their next refresh — and then reads the registry.
func (g *Gateway) remember(ctx context.Context, k policy.RuntimeKey) {
	var version int64 = -1 // unknown: the next refresh reads the registry
	keys := []policy.RuntimeKey{}
	if ks := g.keySet.Load(); ks != nil {
		keys = slices.Clone(ks.keys)
	}
	if i := slices.IndexFunc(keys, func(o policy.RuntimeKey) bool { return o.Org == k.Org && o.ID == k.ID }); i >= 0 {
		keys[i] = k
	} else {
		keys = append(keys, k)
	}
	if err := g.compileKeySet(version, keys, g.settings.Load().cfg); err != nil {
		g.log.Error("applying an API key change", "key", k.Org+"/"+k.ID, "err", err)
	}
	if err := g.RefreshKeys(ctx); err != nil {
		g.log.Warn("refreshing API keys after a change", "err", err)
	}
}

// ListKeys returns the config's keys and the run-time ones (as last read),
// those of org (and team, if given) only when org is not empty.
func (g *Gateway) ListKeys(org, team string) []policy.KeyView {
	match := func(o, t string) bool { return (org == "" || o == org) && (team == "" || t == team) }
	out := []policy.KeyView{}
	for _, o := range g.settings.Load().cfg.Orgs {
		for _, t := range o.Teams {
			for _, k := range t.Keys {
				if match(o.ID, t.ID) {
					out = append(out, policy.KeyView{Org: o.ID, Team: t.ID, ID: k.ID, Source: "config", Models: k.Models, Plan: k.Plan, Unlimited: k.Unlimited})
				}
			}
		}
	}
	for _, k := range g.RuntimeKeys() {
		if match(k.Org, k.Team) {
			created := k.CreatedAt
			out = append(out, policy.KeyView{Org: k.Org, Team: k.Team, ID: k.ID, Source: "admin", Models: k.Models, Plan: k.Plan,
				CreatedAt: &created, CreatedBy: k.CreatedBy, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy})
		}
	}
	return out
}

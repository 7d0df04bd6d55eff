package httpapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// RuntimeKey is an API key made through the admin API. Keys in the config
// file are managed there; these live in a KeyRegistry every instance reads.
type RuntimeKey struct {
	Org       string     `json:"org"`
	Team      string     `json:"team"`
	ID        string     `json:"id"`
	Hash      string     `json:"hash"` // "sha256:<hex>" of the plain key, which is never stored
	Models    []string   `json:"models,omitempty"`
	Plan      string     `json:"plan,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

// KeyRegistry keeps run-time keys where every instance sees them: Redis
// with the Redis store, a file with the embedded one.
type KeyRegistry interface {
	// Version changes whenever a key is created or revoked.
	Version(ctx context.Context) (int64, error)
	// List returns every key, revoked ones included.
	List(ctx context.Context) ([]RuntimeKey, error)
	// Create adds k; ErrKeyExists if its org already has its id.
	Create(ctx context.Context, k RuntimeKey) error
	// Revoke marks org/id revoked at at by by and returns the key, and
	// whether this call revoked it: a key revoked before keeps its first
	// revocation. ErrNoKey if there is none.
	Revoke(ctx context.Context, org, id string, at time.Time, by string) (RuntimeKey, bool, error)
}

// Errors of key management.
var (
	ErrKeyExists = errors.New("a key with this id exists in the org")
	ErrNoKey     = errors.New("no such key")
	ErrConfigKey = errors.New("the key is in the config file: remove it there")
	ErrNoTeam    = errors.New("no such org or team")
	ErrBadKey    = errors.New("bad key")
)

var keyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// KeyView is one key as the admin API lists it: never its hash.
type KeyView struct {
	Org       string     `json:"org"`
	Team      string     `json:"team"`
	ID        string     `json:"id"`
	Source    string     `json:"source"` // "config" or "admin"
	Models    []string   `json:"models,omitempty"`
	Plan      string     `json:"plan,omitempty"`
	Unlimited bool       `json:"unlimited,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	CreatedBy string     `json:"created_by,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

// keySet is the run-time keys as last read, compiled against a config.
type keySet struct {
	version int64
	keys    []RuntimeKey
	dir     *directory
}

// compileKeys builds the directory of the live keys among keys for c. A key
// whose team left the config authenticates nothing.
func compileKeys(c *config.Config, keys []RuntimeKey) (*directory, error) {
	extra := map[[2]string][]config.Key{}
	for _, k := range keys {
		if k.RevokedAt == nil {
			t := [2]string{k.Org, k.Team}
			extra[t] = append(extra[t], config.Key{ID: k.ID, Hash: k.Hash, Plan: k.Plan, Models: k.Models})
		}
	}
	return newDirectory(c, extra)
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

func (g *Gateway) compileKeySet(v int64, keys []RuntimeKey, c *config.Config) error {
	dir, err := compileKeys(c, keys)
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
func (g *Gateway) RuntimeKeys() []RuntimeKey {
	if ks := g.keySet.Load(); ks != nil {
		return ks.keys
	}
	return nil
}

// CreateKey makes a key for org/team and returns it in plain text — the
// only time it exists outside the client — with its record. models (empty:
// the team's) must be models the team may use; plan must be configured.
func (g *Gateway) CreateKey(ctx context.Context, k RuntimeKey) (string, RuntimeKey, error) {
	if g.keys == nil {
		return "", k, errors.New("httpapi: no key registry")
	}
	c := g.settings.Load().cfg
	o := slices.IndexFunc(c.Orgs, func(o config.Org) bool { return o.ID == k.Org })
	if o < 0 {
		return "", k, ErrNoTeam
	}
	ti := slices.IndexFunc(c.Orgs[o].Teams, func(t config.Team) bool { return t.ID == k.Team })
	if ti < 0 {
		return "", k, ErrNoTeam
	}
	team := c.Orgs[o].Teams[ti]
	if !keyID.MatchString(k.ID) {
		return "", k, fmt.Errorf("%w: id must be 1-64 letters, digits, '.', '_' or '-'", ErrBadKey)
	}
	for _, t := range c.Orgs[o].Teams {
		if slices.ContainsFunc(t.Keys, func(ck config.Key) bool { return ck.ID == k.ID }) {
			return "", k, ErrKeyExists
		}
	}
	for _, m := range k.Models {
		if _, ok := c.Models[m]; !ok || (len(team.Models) > 0 && !slices.Contains(team.Models, m)) {
			return "", k, fmt.Errorf("%w: model %q is not one the team may use", ErrBadKey, m)
		}
	}
	if _, ok := c.Plans[k.Plan]; k.Plan != "" && !ok {
		return "", k, fmt.Errorf("%w: no plan %q", ErrBadKey, k.Plan)
	}
	plain := "tg-" + rand.Text()
	k.Hash, k.CreatedAt, k.RevokedAt, k.RevokedBy = HashKey(plain), time.Now().UTC().Truncate(time.Second), nil, ""
	if err := g.keys.Create(ctx, k); err != nil {
		return "", k, err
	}
	g.remember(ctx, k)
	return plain, k, nil
}

// RevokeKey revokes a run-time key: it stops working on this instance at
// once and on the others within their refresh interval.
func (g *Gateway) RevokeKey(ctx context.Context, org, id, by string) (RuntimeKey, bool, error) {
	if g.keys == nil {
		return RuntimeKey{}, false, ErrNoKey
	}
	c := g.settings.Load().cfg
	for _, o := range c.Orgs {
		for _, t := range o.Teams {
			if o.ID == org && slices.ContainsFunc(t.Keys, func(ck config.Key) bool { return ck.ID == id }) {
				return RuntimeKey{}, false, ErrConfigKey
			}
		}
	}
	k, now, err := g.keys.Revoke(ctx, org, id, time.Now().UTC().Truncate(time.Second), by)
	if err != nil {
		return k, false, err
	}
	g.remember(ctx, k)
	return k, now, nil
}

// remember applies a change this instance made at once — the others see
// it at their next refresh — and then reads the registry.
func (g *Gateway) remember(ctx context.Context, k RuntimeKey) {
	var version int64 = -1 // unknown: the next refresh reads the registry
	keys := []RuntimeKey{}
	if ks := g.keySet.Load(); ks != nil {
		keys = slices.Clone(ks.keys)
	}
	if i := slices.IndexFunc(keys, func(o RuntimeKey) bool { return o.Org == k.Org && o.ID == k.ID }); i >= 0 {
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
func (g *Gateway) ListKeys(org, team string) []KeyView {
	match := func(o, t string) bool { return (org == "" || o == org) && (team == "" || t == team) }
	out := []KeyView{}
	for _, o := range g.settings.Load().cfg.Orgs {
		for _, t := range o.Teams {
			for _, k := range t.Keys {
				if match(o.ID, t.ID) {
					out = append(out, KeyView{Org: o.ID, Team: t.ID, ID: k.ID, Source: "config", Models: k.Models, Plan: k.Plan, Unlimited: k.Unlimited})
				}
			}
		}
	}
	for _, k := range g.RuntimeKeys() {
		if match(k.Org, k.Team) {
			created := k.CreatedAt
			out = append(out, KeyView{Org: k.Org, Team: k.Team, ID: k.ID, Source: "admin", Models: k.Models, Plan: k.Plan,
				CreatedAt: &created, CreatedBy: k.CreatedBy, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy})
		}
	}
	return out
}

package policy

import (
	"context"
	"crypto/rand"
	"errors"
	"regexp"
	"time"

	"github.com/tollgate-dev/tollgate/config"
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

// KeyID is what a run-time key id must look like.
var KeyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

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

// CompileKeys builds the directory of the live keys among keys for c. A key
// whose team left the config authenticates nothing.
func CompileKeys(c *config.Config, keys []RuntimeKey) (*Directory, error) {
	extra := map[[2]string][]config.Key{}
	for _, k := range keys {
		if k.RevokedAt == nil {
			t := [2]string{k.Org, k.Team}
			extra[t] = append(extra[t], config.Key{ID: k.ID, Hash: k.Hash, Plan: k.Plan, Models: k.Models})
		}
	}
	return NewDirectory(c, extra)
}

// NewKey is a fresh API key: "tg-" and 26 random base-32 characters
// (130 bits).
func NewKey() string { return "tg-" + rand.Text() }

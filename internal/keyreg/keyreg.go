// Package keyreg keeps the API keys made at run time through the admin API,
// where every gateway instance reads them: a Redis hash with the Redis
// store, a file with the embedded one. Only hashes are kept; the plain key
// exists once, in the answer to its creation.
package keyreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/atomicfile"
	"github.com/tollgate-dev/tollgate/policy"
)

// Redis is a registry in a Redis hash (field "<org>/<id>", value the key's
// JSON) with a version counter, both under one hash tag so Redis Cluster
// keeps them on one node and the scripts run there.
type Redis struct {
	rdb           redis.UniversalClient
	hash, version string
}

var _ policy.KeyRegistry = (*Redis)(nil)

// NewRedis returns the registry under prefix (the store's key prefix).
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, hash: prefix + ":{keys}:all", version: prefix + ":{keys}:version"}
}

// createScript adds a field only if absent, and bumps the version.
var createScript = redis.NewScript(`
if redis.call("HSETNX", KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call("INCR", KEYS[2])
return 1`)

// swapScript replaces a field's value only if it is still ARGV[2].
var swapScript = redis.NewScript(`
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[3])
redis.call("INCR", KEYS[2])
return 1`)

// Version implements policy.KeyRegistry.
func (r *Redis) Version(ctx context.Context) (int64, error) {
	v, err := r.rdb.Get(ctx, r.version).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// List implements policy.KeyRegistry.
func (r *Redis) List(ctx context.Context) ([]policy.RuntimeKey, error) {
	all, err := r.rdb.HGetAll(ctx, r.hash).Result()
	if err != nil {
		return nil, err
	}
	out := make([]policy.RuntimeKey, 0, len(all))
	for field, v := range all {
		var k policy.RuntimeKey
		if err := json.Unmarshal([]byte(v), &k); err != nil {
			return nil, fmt.Errorf("keyreg: key %s: %w", field, err)
		}
		out = append(out, k)
	}
	sortKeys(out)
	return out, nil
}

// Create implements policy.KeyRegistry.
func (r *Redis) Create(ctx context.Context, k policy.RuntimeKey) error {
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	ok, err := createScript.Run(ctx, r.rdb, []string{r.hash, r.version}, k.Org+"/"+k.ID, v).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return policy.ErrKeyExists
	}
	return nil
}

// Revoke implements policy.KeyRegistry.
func (r *Redis) Revoke(ctx context.Context, org, id string, at time.Time, by string) (policy.RuntimeKey, bool, error) {
	field := org + "/" + id
	for {
		old, err := r.rdb.HGet(ctx, r.hash, field).Result()
		if errors.Is(err, redis.Nil) {
			return policy.RuntimeKey{}, false, policy.ErrNoKey
		}
		if err != nil {
			return policy.RuntimeKey{}, false, err
		}
		var k policy.RuntimeKey
		if err := json.Unmarshal([]byte(old), &k); err != nil {
			return k, false, fmt.Errorf("keyreg: key %s: %w", field, err)
		}
		if k.RevokedAt != nil {
			return k, false, nil
		}
		k.RevokedAt, k.RevokedBy = &at, by
		v, err := json.Marshal(k)
		if err != nil {
			return k, false, err
		}
		ok, err := swapScript.Run(ctx, r.rdb, []string{r.hash, r.version}, field, old, v).Int()
		if err != nil {
			return k, false, err
		}
		if ok == 1 {
			return k, true, nil
		}
		// Changed between the read and the swap (revoked elsewhere): again.
	}
}

// File is a registry in a JSON file, for the embedded store's single
// instance: each change is written whole (temp file, fsync, rename).
type File struct {
	path string

	mu      sync.Mutex
	keys    []policy.RuntimeKey
	version int64
}

var _ policy.KeyRegistry = (*File)(nil)

// OpenFile loads the registry at path (none yet is an empty one).
func OpenFile(path string) (*File, error) {
	f := &File{path: path, version: 1}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keyreg: %w", err)
	}
	if err := json.Unmarshal(data, &f.keys); err != nil {
		return nil, fmt.Errorf("keyreg: %s: %w", path, err)
	}
	return f, nil
}

// Version implements policy.KeyRegistry.
func (f *File) Version(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, nil
}

// List implements policy.KeyRegistry.
func (f *File) List(context.Context) ([]policy.RuntimeKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.keys), nil
}

// Create implements policy.KeyRegistry.
func (f *File) Create(_ context.Context, k policy.RuntimeKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.ContainsFunc(f.keys, func(o policy.RuntimeKey) bool { return o.Org == k.Org && o.ID == k.ID }) {
		return policy.ErrKeyExists
	}
	return f.save(append(slices.Clone(f.keys), k))
}

// Revoke implements policy.KeyRegistry.
func (f *File) Revoke(_ context.Context, org, id string, at time.Time, by string) (policy.RuntimeKey, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.keys, func(o policy.RuntimeKey) bool { return o.Org == org && o.ID == id })
	if i < 0 {
		return policy.RuntimeKey{}, false, policy.ErrNoKey
	}
	if f.keys[i].RevokedAt != nil {
		return f.keys[i], false, nil
	}
	keys := slices.Clone(f.keys)
	keys[i].RevokedAt, keys[i].RevokedBy = &at, by
	return keys[i], true, f.save(keys)
}

// save writes keys and, once they are on disk, makes them the registry's.
func (f *File) save(keys []policy.RuntimeKey) error {
	sortKeys(keys)
	data, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(f.path, data); err != nil {
		return fmt.Errorf("keyreg: %w", err)
	}
	f.keys = keys
	f.version++
	return nil
}

func sortKeys(ks []policy.RuntimeKey) {
	slices.SortFunc(ks, func(a, b policy.RuntimeKey) int {
		if c := strings.Compare(a.Org, b.Org); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

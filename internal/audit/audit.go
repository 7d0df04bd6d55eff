// Package audit keeps the admin API's changes — who, when, what, the old
// and the new value — where every gateway instance reads them: PostgreSQL
// beside the ledger, a Redis list with the Redis store, or a local file
// with the embedded one.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/ledger"
)

// Entry is one change.
type Entry struct {
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Old    any       `json:"old"`
	New    any       `json:"new"`
	// Until is when a temporary change lapses; nil for a permanent one.
	Until *time.Time `json:"until,omitempty"`
	// From is when a scheduled change takes effect (New from then on;
	// Old until then).
	From *time.Time `json:"from,omitempty"`
	// Reason is why, in the words of who made the change (required for
	// a period reset).
	Reason string `json:"reason,omitempty"`
}

// Log is an append-only trail of changes.
type Log interface {
	// Append keeps e durably before returning.
	Append(ctx context.Context, e Entry) error
	// List returns every change, oldest first.
	List(ctx context.Context) ([]Entry, error)
}

// File is a trail in a JSON-lines file, each line fsync'd: one instance's
// changes. An empty path keeps nothing (changes are still logged).
type File struct {
	path string
	mu   sync.Mutex
}

// NewFile returns the trail at path.
func NewFile(path string) *File { return &File{path: path} }

// Append implements Log.
func (f *File) Append(_ context.Context, e Entry) error {
	if f.path == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.OpenFile(f.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer fh.Close()
	if _, err := fh.Write(append(line, '\n')); err != nil {
		return err
	}
	return fh.Sync()
}

// List implements Log. A torn last line (a crash mid-write) is skipped.
func (f *File) List(context.Context) ([]Entry, error) {
	out := []Entry{}
	if f.path == "" {
		return out, nil
	}
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return decode(strings.Split(string(data), "\n"), out), nil
}

func decode(lines []string, out []Entry) []Entry {
	for _, line := range lines {
		var e Entry
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// Redis is a trail in a Redis list, shared by the instances of a Redis
// store; as durable as Redis is (appendonly).
type Redis struct {
	rdb redis.UniversalClient
	key string
}

// NewRedis returns the trail under prefix (the store's key prefix).
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, key: prefix + ":{audit}:log"}
}

// Append implements Log.
func (r *Redis) Append(ctx context.Context, e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return r.rdb.RPush(ctx, r.key, line).Err()
}

// List implements Log.
func (r *Redis) List(ctx context.Context) ([]Entry, error) {
	lines, err := r.rdb.LRange(ctx, r.key, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	return decode(lines, []Entry{}), nil
}

// Postgres is a trail in the tollgate_audit table, beside the ledger
// (whose schema creates it).
type Postgres struct {
	db interface {
		Pool(context.Context) (*pgxpool.Pool, error)
	}
}

// NewPostgres returns the trail in the ledger's database.
func NewPostgres(l *ledger.Postgres) *Postgres { return &Postgres{db: l} }

// Append implements Log.
func (p *Postgres) Append(ctx context.Context, e Entry) error {
	pool, err := p.db.Pool(ctx)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `INSERT INTO tollgate_audit (time, who, action, target, entry) VALUES ($1, $2, $3, $4, $5::jsonb)`,
		e.Time, e.Who, e.Action, e.Target, string(doc))
	if err != nil {
		return fmt.Errorf("audit: postgres: %w", err)
	}
	return nil
}

// List implements Log.
func (p *Postgres) List(ctx context.Context) ([]Entry, error) {
	pool, err := p.db.Pool(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT entry::text FROM tollgate_audit ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("audit: postgres: %w", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("audit: postgres: %w", err)
	}
	return decode(docs, []Entry{}), nil
}

// Copy is a shared trail with a local copy of this instance's changes:
// appended to both (the shared one first: it decides), listed from the
// shared one.
type Copy struct {
	Shared, Local Log
}

// Append implements Log.
func (c Copy) Append(ctx context.Context, e Entry) error {
	if err := c.Shared.Append(ctx, e); err != nil {
		return err
	}
	return c.Local.Append(ctx, e)
}

// List implements Log.
func (c Copy) List(ctx context.Context) ([]Entry, error) { return c.Shared.List(ctx) }

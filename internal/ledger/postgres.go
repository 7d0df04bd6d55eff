package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/budget"
)

// Postgres is the production ledger: one row per settlement in the
// tollgate_ledger table, keyed by the entry's id, so delivering an entry
// twice (the outbox is at least once) stores it once.
type Postgres struct {
	pool *pgxpool.Pool

	mu     sync.Mutex
	schema bool // the table is known to exist
}

// schema is applied at start under an advisory lock, so instances starting
// together do not race on CREATE. The entry column holds the entry whole
// (reports read it); the others are what an analyst filters on in SQL.
const schema = `
CREATE TABLE IF NOT EXISTS tollgate_ledger (
	id          text PRIMARY KEY,
	time        timestamptz NOT NULL,
	org         text NOT NULL,
	team        text NOT NULL,
	key_id      text NOT NULL,
	model       text NOT NULL,
	usd_micros  bigint NOT NULL,
	served      boolean NOT NULL,
	outcome     text NOT NULL,
	entry       jsonb NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tollgate_ledger_time ON tollgate_ledger (time);
`

// schemaLock is the advisory lock key of the schema migration.
const schemaLock = 0x746f6c6c67617465 // "tollgate"

// OpenPostgres prepares a ledger in the database at dsn (a URL or
// key=value string). It does not wait for the database: the gateway serves
// while PostgreSQL is away (the outbox holds the entries), and the table is
// created on first use.
func OpenPostgres(dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

// ensureSchema creates the ledger table once per process.
func (p *Postgres) ensureSchema(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.schema {
		return nil
	}
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: postgres: creating the ledger table: %w", err)
	}
	p.schema = true
	return nil
}

// Close closes the connections.
func (p *Postgres) Close() { p.pool.Close() }

// Insert stores entries in one statement, all or none; entries already
// there (by id) are left as they are.
func (p *Postgres) Insert(ctx context.Context, entries []budget.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := p.ensureSchema(ctx); err != nil {
		return err
	}
	n := len(entries)
	ids, times := make([]string, n), make([]time.Time, n)
	orgs, teams, keys, models, outcomes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	costs, served := make([]int64, n), make([]bool, n)
	docs := make([]string, n)
	for i := range entries {
		e := &entries[i]
		doc, err := json.Marshal(e)
		if err != nil {
			return err
		}
		ids[i], times[i], docs[i] = e.ID(), e.Time, string(doc)
		orgs[i], teams[i], keys[i], models[i], outcomes[i] = e.Org, e.Team, e.Key, e.Model, e.Outcome
		costs[i], served[i] = int64(e.Cost), e.Served
	}
	_, err := p.pool.Exec(ctx, `
INSERT INTO tollgate_ledger (id, time, org, team, key_id, model, usd_micros, served, outcome, entry)
SELECT id, time, org, team, key_id, model, usd_micros, served, outcome, entry::jsonb
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::boolean[], $9::text[], $10::text[])
	AS t(id, time, org, team, key_id, model, usd_micros, served, outcome, entry)
ON CONFLICT (id) DO NOTHING`, ids, times, orgs, teams, keys, models, costs, served, outcomes, docs)
	if err != nil {
		return fmt.Errorf("ledger: postgres: inserting %d entries: %w", n, err)
	}
	return nil
}

// Scan calls fn for every entry whose time is in [from, to), oldest first.
func (p *Postgres) Scan(ctx context.Context, from, to time.Time, fn func(budget.Entry) error) error {
	if err := p.ensureSchema(ctx); err != nil {
		return err
	}
	rows, err := p.pool.Query(ctx, `SELECT entry FROM tollgate_ledger WHERE time >= $1 AND time < $2 ORDER BY time, id`, from, to)
	if err != nil {
		return fmt.Errorf("ledger: postgres: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return fmt.Errorf("ledger: postgres: %w", err)
		}
		var e budget.Entry
		if err := json.Unmarshal(doc, &e); err != nil {
			return fmt.Errorf("ledger: postgres: a row is not an entry: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: postgres: %w", err)
	}
	return nil
}

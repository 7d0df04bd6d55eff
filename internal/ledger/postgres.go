package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
// (reads return it); the others are what reports group and sum, and what
// an analyst filters on in SQL.
const schema = `
CREATE TABLE IF NOT EXISTS tollgate_ledger (
	id          text PRIMARY KEY,
	time        timestamptz NOT NULL,
	org         text NOT NULL,
	team        text NOT NULL,
	key_id      text NOT NULL,
	user_name   text NOT NULL,
	route       text NOT NULL,
	model       text NOT NULL,
	upstream    text NOT NULL,
	input_tokens        bigint NOT NULL,
	cached_input_tokens bigint NOT NULL,
	output_tokens       bigint NOT NULL,
	estimated   boolean NOT NULL,
	usd_micros  bigint NOT NULL,
	served      boolean NOT NULL,
	outcome     text NOT NULL,
	entry       jsonb NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tollgate_ledger_time ON tollgate_ledger (time);
CREATE TABLE IF NOT EXISTS tollgate_audit (
	seq    bigserial PRIMARY KEY,
	time   timestamptz NOT NULL,
	who    text NOT NULL,
	action text NOT NULL,
	target text NOT NULL,
	entry  jsonb NOT NULL
);
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
	ids, orgs, teams, keys, users, routes, models, upstreams, outcomes, docs := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	times := make([]time.Time, n)
	input, cached, output, costs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	estimated, served := make([]bool, n), make([]bool, n)
	for i := range entries {
		e := &entries[i]
		doc, err := json.Marshal(e)
		if err != nil {
			return err
		}
		ids[i], times[i], docs[i] = e.ID(), e.Time, string(doc)
		orgs[i], teams[i], keys[i], users[i], routes[i], models[i], upstreams[i], outcomes[i] = e.Org, e.Team, e.Key, e.User, e.Route, e.Model, e.Upstream, e.Outcome
		input[i], cached[i], output[i], estimated[i] = e.Usage.InputTokens, e.Usage.CachedInputTokens, e.Usage.OutputTokens, e.Usage.Estimated
		costs[i], served[i] = int64(e.Cost), e.Served
	}
	_, err := p.pool.Exec(ctx, `
INSERT INTO tollgate_ledger (id, time, org, team, key_id, user_name, route, model, upstream,
	input_tokens, cached_input_tokens, output_tokens, estimated, usd_micros, served, outcome, entry)
SELECT id, time, org, team, key_id, user_name, route, model, upstream,
	input_tokens, cached_input_tokens, output_tokens, estimated, usd_micros, served, outcome, entry::jsonb
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
	$10::bigint[], $11::bigint[], $12::bigint[], $13::boolean[], $14::bigint[], $15::boolean[], $16::text[], $17::text[])
	AS t(id, time, org, team, key_id, user_name, route, model, upstream,
		input_tokens, cached_input_tokens, output_tokens, estimated, usd_micros, served, outcome, entry)
ON CONFLICT (id) DO NOTHING`, ids, times, orgs, teams, keys, users, routes, models, upstreams,
		input, cached, output, estimated, costs, served, outcomes, docs)
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

// Aggregator is a Source that sums entries itself, so a report does not
// carry every entry of a month into the gateway.
type Aggregator interface {
	Aggregate(ctx context.Context, q Query) ([]Group, error)
}

// Query is a report: served entries whose civil time on their org's
// calendar is in [From, To) (civil times written in UTC), summed by the
// dimensions in By (org, team — org/team —, key — org/team/key —, user,
// model, served_model, route, upstream, day, month — day and month on the
// org's calendar), of the teams in Teams ("org/team"; nil: every team).
type Query struct {
	From, To time.Time
	By       []string
	Calendar func(org string) *time.Location
	Teams    []string
}

// Group is one row of a report: the values of Query.By, in order, and the
// sums.
type Group struct {
	Key                                                                          []string
	Requests, InputTokens, CachedInputTokens, OutputTokens, USDMicros, Estimated int64
}

// columns are the SQL expressions of the report dimensions, over the
// subquery in Aggregate.
var columns = map[string]string{
	"org": "org", "team": "org || '/' || team", "key": "org || '/' || team || '/' || key_id", "model": "model", "served_model": "served_model",
	"user": "user_name", "route": "route", "upstream": "upstream",
	"day": "to_char(civil, 'YYYY-MM-DD')", "month": "to_char(civil, 'YYYY-MM')",
}

// Aggregate implements Aggregator in SQL: one query per calendar among the
// orgs with entries in range, each reading an entry's civil time with AT
// TIME ZONE, as the file ledger's reports do in Go.
func (p *Postgres) Aggregate(ctx context.Context, q Query) ([]Group, error) {
	if err := p.ensureSchema(ctx); err != nil {
		return nil, err
	}
	dims := make([]string, len(q.By))
	for i, d := range q.By {
		c, ok := columns[d]
		if !ok {
			return nil, fmt.Errorf("ledger: unknown dimension %q", d)
		}
		dims[i] = c
	}
	zones, err := p.orgsByZone(ctx, q)
	if err != nil {
		return nil, err
	}
	group := strings.Join(dims, ", ")
	sel := group
	if len(dims) == 0 {
		group, sel = "()", "''"
	}
	query := `SELECT ARRAY[` + sel + `]::text[], count(*), coalesce(sum(input), 0)::bigint, coalesce(sum(cached), 0)::bigint, coalesce(sum(output), 0)::bigint, coalesce(sum(usd_micros), 0)::bigint,
	count(*) FILTER (WHERE estimated)
FROM (
	SELECT org, team, key_id, user_name, route, model, coalesce(nullif(entry->>'served_model', ''), model) AS served_model, upstream, usd_micros, time AT TIME ZONE $1::text AS civil,
		input_tokens AS input, cached_input_tokens AS cached, output_tokens AS output, estimated
	FROM tollgate_ledger
	WHERE served AND org = ANY($2) AND time >= $3 AND time < $4
		AND ($5::text[] IS NULL OR org || '/' || team = ANY($5))
) t
GROUP BY ` + group + `
HAVING count(*) > 0`
	merged := map[string]*Group{}
	for tz, orgs := range zones {
		// The civil range on this calendar as instants: the planner then
		// sees an exact time range (and picks a hash aggregate).
		loc := q.Calendar(orgs[0])
		in := func(c time.Time) time.Time {
			return time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), loc)
		}
		rows, err := p.pool.Query(ctx, query, tz, orgs, in(q.From), in(q.To), q.Teams)
		if err != nil {
			return nil, fmt.Errorf("ledger: postgres: report: %w", err)
		}
		var g Group
		_, err = pgx.ForEachRow(rows, []any{&g.Key, &g.Requests, &g.InputTokens, &g.CachedInputTokens, &g.OutputTokens, &g.USDMicros, &g.Estimated}, func() error {
			if len(dims) == 0 {
				g.Key = nil
			}
			k := strings.Join(g.Key, "\x00")
			if m := merged[k]; m != nil {
				m.Requests += g.Requests
				m.InputTokens += g.InputTokens
				m.CachedInputTokens += g.CachedInputTokens
				m.OutputTokens += g.OutputTokens
				m.USDMicros += g.USDMicros
				m.Estimated += g.Estimated
				return nil
			}
			cp := g
			cp.Key = slices.Clone(g.Key)
			merged[k] = &cp
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("ledger: postgres: report: %w", err)
		}
	}
	out := make([]Group, 0, len(merged))
	for _, g := range merged {
		out = append(out, *g)
	}
	return out, nil
}

// orgsByZone groups the orgs with spend around q's range by the time zone
// of their calendar: each zone is one query, its civil range one exact
// range of instants.
func (p *Postgres) orgsByZone(ctx context.Context, q Query) (map[string][]string, error) {
	// Civil times are within a day of UTC everywhere (UTC−12 to UTC+14).
	rows, err := p.pool.Query(ctx, `SELECT DISTINCT org FROM tollgate_ledger WHERE served AND time >= $1 AND time < $2`,
		q.From.Add(-24*time.Hour), q.To.Add(24*time.Hour))
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err)
	}
	orgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err)
	}
	zones := map[string][]string{}
	for _, o := range orgs {
		tz := q.Calendar(o).String()
		zones[tz] = append(zones[tz], o)
	}
	return zones, nil
}

// Pool returns the ledger's connection pool once its tables exist, for
// the audit trail kept beside it (tollgate_audit).
func (p *Postgres) Pool(ctx context.Context) (*pgxpool.Pool, error) {
	if err := p.ensureSchema(ctx); err != nil {
		return nil, err
	}
	return p.pool, nil
}

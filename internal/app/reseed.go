package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/policy"
)

// Reseeded is one budget rebuilt from the ledger.
type Reseeded struct {
	Bucket string `json:"bucket"`
	Period string `json:"period"`
	Unit   string `json:"unit"`
	// Ledger is the period's spend by the ledger; Was what the store held;
	// Now what it holds after the reseed (the larger of the two).
	Ledger int64 `json:"ledger"`
	Was    int64 `json:"was"`
	Now    int64 `json:"now"`
}

// ReseedReport is what Reseed did.
type ReseedReport struct {
	Budgets []Reseeded `json:"budgets"`
	Entries int        `json:"entries"`
	// FromStream counts entries taken from the Redis ledger streams that
	// were not in PostgreSQL yet.
	FromStream int `json:"from_stream"`
	// Skipped names budgets the ledger cannot rebuild (split by client
	// IP; keys no longer configured), with how many entries hit each.
	Skipped map[string]int `json:"skipped,omitempty"`
}

// Reseed rebuilds the settled spend of every budget's current period from
// the ledger, after the store lost it (a Redis restart without its data, a
// lost snapshot): each budget's spend is raised to what the ledger says,
// never lowered, so it is safe while the gateway serves (embedded store:
// run it with the gateway stopped, it owns the snapshot). With dryRun the
// store is only read.
//
// Every budget is counted as the request path charged it: the same
// buckets, units, plans, time zones, key_by and shards, from this config.
// Entries settled but not yet moved from Redis to PostgreSQL are read from
// the ledger streams.
func (a *App) Reseed(ctx context.Context, dryRun bool) (*ReseedReport, error) {
	src, err := a.ledgerSource()
	if err != nil {
		return nil, err
	}
	charges, err := policy.NewCharges(a.cfg, a.gateway.RuntimeKeys())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rep := &ReseedReport{Skipped: map[string]int{}}
	type total struct {
		limit budget.Limit
		sum   int64
	}
	totals := map[string]*total{}
	seen := map[string]bool{}
	add := func(e budget.Entry) error {
		if seen[e.ID()] {
			return nil
		}
		seen[e.ID()] = true
		rep.Entries++
		cs, skipped := charges.Of(e)
		for _, s := range skipped {
			rep.Skipped[s]++
		}
		for _, c := range cs {
			l := c.Limit
			// Only the period in force now: earlier ones are history.
			if budget.PeriodID(l.Period, e.Time, l.Location) != budget.PeriodID(l.Period, now, l.Location) {
				continue
			}
			k := l.Partition + "\x00" + l.Bucket
			if totals[k] == nil {
				totals[k] = &total{limit: l}
			}
			totals[k].sum += c.Amount
		}
		return nil
	}
	// Every current period began within the last 32 days.
	if err := src.Scan(ctx, now.AddDate(0, 0, -32), now.Add(time.Hour), add); err != nil {
		return nil, err
	}
	if a.shared != nil && a.shared.pg != nil {
		for _, org := range a.shared.store.KnownPartitions() {
			backlog, err := a.shared.store.LedgerBacklog(ctx, org)
			if err != nil {
				return nil, err
			}
			before := rep.Entries
			for _, e := range backlog {
				_ = add(e)
			}
			rep.FromStream += rep.Entries - before
		}
	}
	for _, t := range totals {
		r, err := a.raise(ctx, t.limit, t.sum, now, dryRun)
		if err != nil {
			return nil, err
		}
		rep.Budgets = append(rep.Budgets, r)
	}
	slices.SortFunc(rep.Budgets, func(x, y Reseeded) int { return strings.Compare(x.Bucket, y.Bucket) })
	return rep, nil
}

// ledgerSource is where the reseed reads the ledger: PostgreSQL beside
// Redis — a ledger_path file there is one instance's copy, without the
// other instances' settlements or the sweeps they made —, else the ledger
// file (with the embedded store the file is complete; PostgreSQL, if
// configured, may not have every line of it yet).
func (a *App) ledgerSource() (ledger.Source, error) {
	switch {
	case a.shared != nil && a.shared.pg != nil:
		return a.shared.pg, nil
	case a.shared != nil:
		return nil, errors.New("no ledger to reseed from: with the Redis store the ledger is ledger_postgres")
	case a.cfg.LedgerPath != "":
		return ledger.FileSource(a.cfg.LedgerPath), nil
	}
	return nil, errors.New("no ledger configured (ledger_postgres or ledger_path)")
}

// raise raises l's spend in the current period to what the ledger holds
// (never lowers it); a dry run only reads it.
func (a *App) raise(ctx context.Context, l budget.Limit, sum int64, now time.Time, dryRun bool) (Reseeded, error) {
	r := Reseeded{Bucket: l.Bucket, Period: budget.PeriodID(l.Period, now, l.Location), Unit: l.Unit.String(), Ledger: sum}
	raise := sum
	if dryRun {
		raise = 0 // raising to nothing changes nothing: a read
	}
	was, err := a.store.RaiseSpent(ctx, l, raise)
	if err != nil {
		return r, err
	}
	r.Was, r.Now = was, max(was, raise)
	return r, nil
}

// rebuildRetry is how long a failed rebuild of lost budgets waits before
// it is tried again.
const rebuildRetry = 5 * time.Second

// rebuildLost rebuilds from the ledger the orgs whose budget state Redis
// lost beyond what this instance could replay (redisstore.Options.OnLost),
// then serves them again; until then they are refused. A failed rebuild
// is tried again every rebuildRetry.
func (a *App) rebuildLost(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.shared.lost:
		}
		for {
			err := a.rebuild(ctx)
			if err == nil {
				break
			}
			a.log.Error("rebuilding lost budgets from the ledger failed; their orgs stay refused", "err", err, "retry_in", rebuildRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(rebuildRetry):
			}
		}
	}
}

// rebuild raises every budget to what the ledger holds (Reseed), then
// serves the lost orgs again. Without a ledger there is nothing to rebuild
// from: they are served from what Redis holds, with an error in the log.
func (a *App) rebuild(ctx context.Context) error {
	lost := a.shared.store.LostPartitions()
	if len(lost) == 0 {
		return nil
	}
	if a.shared.pg == nil {
		a.log.Error("Redis lost budget state and there is no ledger (ledger_postgres) to rebuild it from: these orgs are served again from what Redis holds now, their spend before the loss forgotten",
			"orgs", lost)
	} else {
		rep, err := a.Reseed(ctx, false)
		if err != nil {
			return err
		}
		a.log.Warn("rebuilt budgets from the ledger after Redis lost them; their orgs are served again",
			"orgs", lost, "budgets", len(rep.Budgets), "entries", rep.Entries, "from_stream", rep.FromStream)
	}
	for _, p := range lost {
		if err := a.shared.store.Rebuilt(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

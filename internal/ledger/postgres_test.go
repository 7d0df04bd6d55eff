package ledger_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// The PostgreSQL ledger stores an id once however often it is delivered,
// keeps entries exactly (µ$, nanoseconds, usage), reads a time range, and
// fails — never half-stores — while the database is away.
func TestPostgresLedger(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	pg, err := ledger.OpenPostgres(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	t0 := time.Date(2026, 11, 30, 23, 59, 59, 999_999_999, time.UTC)
	mk := func(id string, at time.Time, cost budget.Money) budget.Entry {
		return budget.Entry{Time: at, RequestID: "r" + id, ReservationID: id, Org: "acme", Team: "ml", Key: "k1", Model: "gpt-4o",
			Usage: budget.Usage{InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 50, ReasoningTokens: 7}, Cost: cost,
			Reserved: cost + 1, Served: true, Outcome: "settled"}
	}
	a, b, c := mk("acme/a", t0, 9_223_372_036), mk("acme/b", t0.Add(time.Nanosecond), 1), mk("acme/c", t0.Add(time.Hour), 2)
	// Duplicates within a batch and across batches are stored once.
	if err := pg.Insert(ctx, []budget.Entry{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if err := pg.Insert(ctx, []budget.Entry{b, c}); err != nil {
		t.Fatal(err)
	}
	var got []budget.Entry
	if err := pg.Scan(ctx, t0, t0.Add(time.Hour), func(e budget.Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ReservationID != "acme/a" || got[1].ReservationID != "acme/b" {
		t.Fatalf("scan [t0, t0+1h) = %+v", got)
	}
	if !got[0].Time.Equal(a.Time) || got[0].Cost != a.Cost || !reflect.DeepEqual(got[0].Usage, a.Usage) || got[0].Reserved != a.Reserved {
		t.Fatalf("round trip changed the entry:\n got %+v\nwant %+v", got[0], a)
	}
	var rows, sum int64
	if err := db.Conn().QueryRow(ctx, "SELECT count(*), sum(usd_micros) FROM tollgate_ledger").Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || sum != int64(a.Cost+b.Cost+c.Cost) {
		t.Fatalf("table holds %d rows summing %d", rows, sum)
	}

	db.Block()
	if err := pg.Insert(ctx, []budget.Entry{mk("acme/d", t0, 4)}); err == nil {
		t.Fatal("insert succeeded with the database refusing connections")
	}
	db.Unblock()
	if err := pg.Insert(ctx, []budget.Entry{mk("acme/d", t0, 4)}); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
}

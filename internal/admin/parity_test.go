package admin_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// The PostgreSQL ledger sums a report in SQL; the file ledger in Go. On
// the same 3,000 entries — three calendars, times clustered around month
// and day boundaries, optional users and upstreams, unserved and estimated
// entries — every grouping, range and team filter gives the same rows.
func TestSQLReportsEqualTheFileLedgers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	orgs := []string{"tokyo", "ny", "utc"}
	zones := map[string]*time.Location{}
	for org, name := range map[string]string{"tokyo": "Asia/Tokyo", "ny": "America/New_York", "utc": "UTC"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones[org] = loc
	}
	calendar := func(org string) *time.Location { return zones[org] }
	boundary := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	entries := make([]budget.Entry, 3000)
	for i := range entries {
		e := budget.Entry{RequestID: fmt.Sprint(i), Org: orgs[rng.IntN(3)], Team: []string{"a", "b"}[rng.IntN(2)], Key: fmt.Sprint("k", rng.IntN(4)),
			Model: []string{"gpt-4o", "claude", "emb"}[rng.IntN(3)], Route: "/v1/chat/completions", Served: rng.IntN(10) > 0,
			Time: boundary.Add(time.Duration(rng.Int64N(int64(40*time.Hour))) - 20*time.Hour).Add(time.Duration(rng.IntN(1000))), // ns, too
			Cost: budget.Money(rng.Int64N(5_000_000)), Usage: budget.Usage{InputTokens: rng.Int64N(9000), OutputTokens: rng.Int64N(900), Estimated: rng.IntN(7) == 0}}
		e.Usage.CachedInputTokens = e.Usage.InputTokens / 3
		if rng.IntN(2) == 0 {
			e.User = fmt.Sprint("user-", rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			e.Upstream = "primary"
		}
		entries[i] = e
	}
	file := ledger.FileSource(writeLedger(t, entries))
	pg := pgLedger(t, entries)
	ctx := context.Background()
	n := 0
	for _, by := range [][]string{{"team"}, {"org", "month"}, {"org", "day"}, {"model", "key"}, {"user", "upstream", "route"}, {},
		{"org", "team", "key", "user", "model", "route", "upstream", "day", "month"}} {
		for _, r := range [][2]string{{"2026-11-01", "2026-12-01"}, {"2026-12-01", "2027-01-01"}, {"2026-11-30", "2026-12-01"}, {"2026-11-01", "2027-01-01"}} {
			from, _ := time.Parse("2006-01-02", r[0])
			to, _ := time.Parse("2006-01-02", r[1])
			for _, teams := range [][]string{nil, {"tokyo/a", "ny/b"}, {}} {
				want, err := admin.Report(ctx, file, from, to, by, calendar, teams)
				if err != nil {
					t.Fatal(err)
				}
				got, err := admin.Report(ctx, pg, from, to, by, calendar, teams)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("by %v, %v, teams %v:\n sql  %+v\n file %+v", by, r, teams, got, want)
				}
				if len(want) > 0 {
					n++
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d non-empty reports compared", n)
	}
}

// BenchmarkMonthReport: the finance page's team report over a month of
// 200,000 entries, summed in SQL by PostgreSQL and scanned in Go from the
// same PostgreSQL table (what reports did before Aggregate).
//
//	go test -run XXX -bench MonthReport -benchtime 5x ./internal/admin/
func BenchmarkMonthReport(b *testing.B) {
	const n = 200_000
	entries := make([]budget.Entry, 0, 10_000)
	db := pgtest.New(b)
	pg, err := ledger.OpenPostgres(db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		entries = append(entries, budget.Entry{RequestID: fmt.Sprint(i), Org: "acme", Team: fmt.Sprint("team-", i%20), Key: fmt.Sprint("k", i%200),
			Model: "gpt-4o-mini", Route: "/v1/chat/completions", Upstream: "openai", Served: true, Time: start.Add(time.Duration(i) * 13 * time.Second),
			Cost: budget.Money(i % 9000), Usage: budget.Usage{InputTokens: 1200, OutputTokens: 300}})
		if len(entries) == cap(entries) {
			if err := pg.Insert(context.Background(), entries); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	// The statistics autovacuum would have gathered on a live table.
	if _, err := db.Conn().Exec(context.Background(), "ANALYZE tollgate_ledger"); err != nil {
		b.Fatal(err)
	}
	utc := func(string) *time.Location { return time.UTC }
	from, to := start, start.AddDate(0, 1, 0)
	scanOnly := struct{ ledger.Source }{pg} // hides Aggregate: the Go scan
	for _, tc := range []struct {
		name string
		src  ledger.Source
	}{{"sql", pg}, {"scan", scanOnly}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				rows, err := admin.Report(context.Background(), tc.src, from, to, []string{"org", "team"}, utc, nil)
				if err != nil || len(rows) != 20 {
					b.Fatalf("%d rows, %v", len(rows), err)
				}
			}
		})
	}
}

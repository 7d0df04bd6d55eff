package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// BenchmarkLedgerDrain: how fast one instance's consumer moves a backlog
// of settled entries from the ledger stream into PostgreSQL (the catch-up
// after a PostgreSQL outage). b.N entries are settled first, untimed; the
// timer covers the drain until the stream is empty.
//
//	go test -run XXX -bench LedgerDrain -benchtime 20000x ./budget/redisstore/
func BenchmarkLedgerDrain(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	db := pgtest.New(b)
	pg, err := ledger.OpenPostgres(db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Insert(bg, []budget.Entry{*benchEntry()}); err != nil { // the table, created before the clock starts
		b.Fatal(err)
	}
	s := redisstore.New(rdb, redisstore.Options{Timeout: time.Second, Ledger: true})
	e := budget.NewEngine(s, time.Minute)
	limits := requestLimits()
	for range b.N {
		r, _, err := e.Reserve(bg, limits, budget.Amounts{Tokens: 10, Requests: 1, Cost: 10})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.SettleEntry(bg, r, budget.Amounts{Tokens: 5, Requests: 1, Cost: 5}, benchEntry()); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		s.ConsumeLedger(ctx, pg.Insert, redisstore.ConsumerOptions{Name: "bench", Partitions: []string{"acme"}, Block: 10 * time.Millisecond})
	}()
	testkit.WaitFor(time.Hour, func() bool {
		n, err := rdb.XLen(bg, s.LedgerStream("acme")).Result()
		if err != nil {
			b.Fatal(err)
		}
		return n == 0
	})
	b.StopTimer()
	cancel()
	<-done
	var rows int64
	if err := db.Conn().QueryRow(bg, "SELECT count(*) FROM tollgate_ledger").Scan(&rows); err != nil || rows != int64(b.N)+1 {
		b.Fatalf("%d rows for %d entries: %v", rows, b.N, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

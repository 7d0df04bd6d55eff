package memstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
)

// BenchmarkJournal reserves and settles one request, in memory only and
// with the journal (a snapshot path on this machine's disk), one client at
// a time and with many (whose records share fsyncs).
//
//	go test -run XXX -bench Journal -benchtime 2000x ./budget/memstore/
func BenchmarkJournal(b *testing.B) {
	for _, c := range []struct {
		name    string
		journal bool
		clients int
	}{{"memory/serial", false, 1}, {"journal/serial", true, 1}, {"memory/parallel", false, 32}, {"journal/parallel", true, 32}} {
		b.Run(c.name, func(b *testing.B) {
			opts := memstore.Options{}
			if c.journal {
				opts.SnapshotPath = filepath.Join(b.TempDir(), "state.json")
			}
			s, err := memstore.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			e := budget.NewEngine(s, time.Minute)
			ctx := context.Background()
			pair := func() {
				r, _, err := e.Reserve(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 10})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := e.Settle(ctx, r, budget.Amounts{Cost: 5}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetParallelism(c.clients)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					pair()
				}
			})
		})
	}
}

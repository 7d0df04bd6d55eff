package memstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/budget/storetest"
)

// A process killed without its last snapshot (kill -9, a power cut): the
// next one finds everything the first acknowledged — the month's spend,
// the reservation still open (charged in full at once: no one can settle
// it now), a ceiling change, a spent bypass nonce — from the snapshot and
// the journal after it. Before the journal, what happened since the last
// snapshot (up to 30 s) was forgotten: a team reached 1.96 × its ceiling
// and a signed request could be replayed.
func TestACrashLosesNothingTheStoreAcknowledged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	ctx := context.Background()
	var expired []budget.Entry
	s1, err := memstore.New(memstore.Options{Now: c.Now, SnapshotPath: path, OnExpire: func(e budget.Entry) { expired = append(expired, e) }})
	if err != nil {
		t.Fatal(err)
	}
	e1 := budget.NewEngine(s1, 10*time.Minute)
	team := snapshotTeam
	settle := func(n int) {
		for range n {
			r, _, err := e1.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: budget.Dollar})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e1.Settle(ctx, r, budget.Amounts{Cost: 600_000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle(3)
	if err := s1.Snapshot(); err != nil { // a periodic snapshot, then more
		t.Fatal(err)
	}
	settle(2)
	if _, _, err := e1.ReserveFor(ctx, []budget.Limit{team}, budget.Amounts{Cost: 2 * budget.Dollar},
		&budget.Entry{Team: "ml", Reserved: 2 * budget.Dollar}); err != nil {
		t.Fatal(err)
	}
	if err := s1.SetCeiling(ctx, "", team.Bucket, int64(7*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if took, err := s1.Claim(ctx, "acme", "bypass:nonce-1", time.Hour); err != nil || !took {
		t.Fatalf("claim: %v %v", took, err)
	}
	// The process dies here: no Close, no snapshot.

	var expired2 []budget.Entry
	s2, err := memstore.New(memstore.Options{Now: c.Now, SnapshotPath: path, OnExpire: func(e budget.Entry) { expired2 = append(expired2, e) }})
	if err != nil {
		t.Fatal(err)
	}
	period := budget.PeriodID(team.Period, c.Now(), nil)
	if spent, pending := s2.Spent(team.Bucket, period); spent != 3_000_000 || pending != int64(2*budget.Dollar) {
		t.Fatalf("after the crash spent %d pending %d, want 3000000 and the open 2000000", spent, pending)
	}
	if amount, _, ok, _ := s2.Override(ctx, "", team.Bucket); !ok || amount != int64(7*budget.Dollar) {
		t.Fatalf("the ceiling change: %d %v, want $7", amount, ok)
	}
	if took, err := s2.Claim(ctx, "acme", "bypass:nonce-1", time.Hour); err != nil || took {
		t.Fatalf("the spent nonce was claimed again: %v %v", took, err)
	}
	// The open reservation is charged at the first sweep, not after its
	// ten-minute lease, with its ledger entry.
	if n, err := s2.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want the dead process's reservation", n, err)
	}
	if spent, pending := s2.Spent(team.Bucket, period); spent != 5_000_000 || pending != 0 {
		t.Fatalf("after the sweep spent %d pending %d, want 5000000 and nothing pending", spent, pending)
	}
	if len(expired2) != 1 || expired2[0].Outcome != "expired" || expired2[0].Cost != 2*budget.Dollar {
		t.Fatalf("expired entries %+v", expired2)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

// A snapshot keeps the journal short: the records it holds are dropped.
func TestASnapshotCompactsTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	ctx := context.Background()
	s := openSnapshot(t, path, c)
	e := budget.NewEngine(s, time.Minute)
	for range 20 {
		r, _, err := e.Reserve(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Settle(ctx, r, budget.Amounts{Cost: 500}); err != nil {
			t.Fatal(err)
		}
	}
	lines := func() int {
		data, err := os.ReadFile(path + ".journal")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), "\n")
	}
	if n := lines(); n != 40 {
		t.Fatalf("%d journal records, want one per reservation and settlement", n)
	}
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if n := lines(); n != 0 {
		t.Fatalf("%d records after a snapshot, want none", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := openSnapshot(t, path, c)
	if spent, _ := again.Spent(snapshotTeam.Bucket, budget.PeriodID(budget.Month, c.Now(), nil)); spent != 10_000 {
		t.Fatalf("spent %d after a clean restart, want 10000", spent)
	}
}

// A torn last record (a crash mid-write, never acknowledged) is skipped; a
// bad record before others stops the store from starting rather than
// start without what it acknowledged.
func TestAJournalWithATornOrBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	ctx := context.Background()
	s := openSnapshot(t, path, c)
	if _, err := s.RaiseSpent(ctx, snapshotTeam, 4242); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path+".journal", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"s":9,"w":[{"k":"c","b":"te`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	again := openSnapshot(t, path, c)
	if spent, _ := again.Spent(snapshotTeam.Bucket, budget.PeriodID(budget.Month, c.Now(), nil)); spent != 4242 {
		t.Fatalf("spent %d, want 4242 with the torn record skipped", spent)
	}
	// The torn record was cut off: new records follow whole lines.
	if _, err := again.RaiseSpent(ctx, snapshotTeam, 5000); err != nil {
		t.Fatal(err)
	}
	third := openSnapshot(t, path, c)
	if spent, _ := third.Spent(snapshotTeam.Bucket, budget.PeriodID(budget.Month, c.Now(), nil)); spent != 5000 {
		t.Fatalf("spent %d, want 5000", spent)
	}
	data, err := os.ReadFile(path + ".journal")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".journal", append([]byte("not a record\n"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := memstore.New(memstore.Options{Now: c.Now, SnapshotPath: path}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a bad record before others: %v, want the store refused naming the line", err)
	}
}

// A settlement's ledger entry is in its journal record: a process that
// died before the ledger file had the line hands it back at start.
func TestASettlementsLedgerEntryIsRecovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	ctx := context.Background()
	s1 := openSnapshot(t, path, c)
	e1 := budget.NewEngine(s1, time.Minute)
	if !e1.KeepsLedger() {
		t.Fatal("a store with a journal keeps the settlements' ledger entries")
	}
	r, _, err := e1.Reserve(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.SettleEntry(ctx, r, budget.Amounts{Cost: 700}, &budget.Entry{RequestID: "req-1", Team: "ml", Cost: 700}); err != nil {
		t.Fatal(err)
	}
	s2 := openSnapshot(t, path, c)
	got := s2.Recovered()
	if len(got) != 1 || got[0].ReservationID != r.ID || got[0].Cost != 700 || got[0].Outcome != "settled" {
		t.Fatalf("recovered %+v, want the settlement's entry", got)
	}
}

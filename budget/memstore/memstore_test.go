package memstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/budget/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c *storetest.Clock) budget.Backend {
		s, err := memstore.New(memstore.Options{Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// snapshotTeam is a $10 monthly team budget the snapshot tests charge.
var snapshotTeam = budget.Limit{Bucket: "team", Name: "team", Scope: budget.ScopeTeam, Kind: budget.Ceiling,
	Unit: budget.Microdollars, Amount: int64(10 * budget.Dollar), Period: budget.Month}

// openSnapshot opens an embedded store on clock c that snapshots to path.
func openSnapshot(t *testing.T, path string, c *storetest.Clock) *memstore.Store {
	t.Helper()
	s, err := memstore.New(memstore.Options{Now: c.Now, SnapshotPath: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotKeepsMonthToDateSpend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	team := snapshotTeam
	ctx := context.Background()

	s1 := openSnapshot(t, path, c)
	e1 := budget.NewEngine(s1, time.Minute)
	r, _, err := e1.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: 3 * budget.Dollar})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Settle(ctx, r, budget.Amounts{Cost: 2 * budget.Dollar}); err != nil {
		t.Fatal(err)
	}
	// A reservation still open when the process dies survives as a lease.
	if _, _, err := e1.Reserve(ctx, []budget.Limit{team}, budget.Amounts{Cost: 1 * budget.Dollar}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openSnapshot(t, path, c)
	if spent, pending := s2.Spent("team", "2026-11"); spent != int64(2*budget.Dollar) || pending != int64(budget.Dollar) {
		t.Fatalf("after restart spent=%d pending=%d, want 2$ and 1$", spent, pending)
	}
	c.Advance(2 * time.Minute)
	if n, err := s2.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep of the dead process's lease: n=%d err=%v", n, err)
	}
	if spent, pending := s2.Spent("team", "2026-11"); spent != int64(3*budget.Dollar) || pending != 0 {
		t.Fatalf("after sweep spent=%d pending=%d, want 3$ and 0", spent, pending)
	}
	// Settling the replayed id again after a restart charges nothing more.
	if o, err := e1.Settle(ctx, r, budget.Amounts{Cost: 2 * budget.Dollar}); err != nil || o != budget.AlreadySettled {
		t.Fatalf("replayed settle on the old store: %v %v", o, err)
	}
}

// A temporary ceiling keeps its expiry across a restart: it must not
// come back as a permanent one.
func TestSnapshotKeepsTemporaryCeilings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	team := snapshotTeam
	ctx := context.Background()
	s1 := openSnapshot(t, path, c)
	if err := s1.SetCeiling(ctx, "", "team", int64(50*budget.Dollar), c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openSnapshot(t, path, c)
	if st, _ := s2.Peek(ctx, []budget.Limit{team}); st[0].Capacity != int64(50*budget.Dollar) {
		t.Fatalf("after restart: %+v", st[0])
	}
	c.Advance(time.Hour)
	if st, _ := s2.Peek(ctx, []budget.Limit{team}); st[0].Capacity != int64(10*budget.Dollar) {
		t.Fatalf("after restart and expiry: %+v", st[0])
	}
}

func TestSnapshotRefusesUnknownVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := writeFile(path, `{"version": 99}`); err != nil {
		t.Fatal(err)
	}
	if _, err := memstore.New(memstore.Options{SnapshotPath: path}); err == nil {
		t.Fatal("a snapshot of an unknown version was loaded")
	}
}

// A reservation's ledger entry survives a restart with it, and the sweeper
// hands it over charged at the reservation, once.
func TestSweptReservationReachesTheLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	c := storetest.NewClock(storetest.Start)
	ctx := context.Background()
	var got []budget.Entry
	open := func() *memstore.Store {
		s, err := memstore.New(memstore.Options{Now: c.Now, SnapshotPath: path, OnExpire: func(e budget.Entry) { got = append(got, e) }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := open()
	e1 := budget.NewEngine(s1, time.Minute)
	pre := &budget.Entry{Time: c.Now(), RequestID: "req1", Org: "acme", Team: "ml", Key: "k1", Model: "m", Reserved: 1234, Cost: 1234, Served: true}
	r, _, err := e1.ReserveFor(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 1234}, pre)
	if err != nil {
		t.Fatal(err)
	}
	settled, _, err := e1.ReserveFor(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 99}, &budget.Entry{RequestID: "req2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Settle(ctx, settled, budget.Amounts{Cost: 50}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open()
	c.Advance(2 * time.Minute)
	for range 2 {
		if _, err := s2.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d entries from the sweeper, want the one unsettled reservation's: %+v", len(got), got)
	}
	if e := got[0]; e.ReservationID != r.ID || e.Outcome != "expired" || e.Cost != 1234 || !e.Usage.Estimated || !e.Time.Equal(pre.Time) || e.Team != "ml" {
		t.Fatalf("swept entry %+v", e)
	}
	if spent, _ := s2.Spent("team", "2026-11"); spent != 1234+50 {
		t.Fatalf("spent %d, want the swept reservation and the settled request", spent)
	}
}

// A settled reservation is not kept: the snapshot of a store that settled
// 2,000 requests is no larger than one that settled 10 (a day of tombstones
// at 1,000 requests a second was 86 M entries).
func TestSettledReservationsAreNotKept(t *testing.T) {
	ctx := context.Background()
	size := func(n int) int64 {
		path := filepath.Join(t.TempDir(), "state.json")
		s := openSnapshot(t, path, storetest.NewClock(storetest.Start))
		e := budget.NewEngine(s, time.Minute)
		for range n {
			r, _, err := e.Reserve(ctx, []budget.Limit{snapshotTeam}, budget.Amounts{Cost: 3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Settle(ctx, r, budget.Amounts{Cost: 2}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	few, many := size(10), size(2000)
	if many > few+64 {
		t.Fatalf("the snapshot grew from %d to %d bytes with the settled requests", few, many)
	}
}

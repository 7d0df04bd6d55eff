package audit_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

func TestFile(t *testing.T) {
	trail(t, audit.NewFile(filepath.Join(t.TempDir(), "audit.jsonl")))
}

func TestRedis(t *testing.T) {
	trail(t, audit.NewRedis(redistest.Start(t).Client(), "tg"))
}

func TestPostgres(t *testing.T) {
	l, err := ledger.OpenPostgres(pgtest.New(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	trail(t, audit.NewPostgres(l))
}

// trail checks a Log keeps changes whole and in order, from two writers
// (two instances) alike.
func trail(t *testing.T, log audit.Log) {
	ctx := context.Background()
	if got, err := log.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a new trail: %v %v", got, err)
	}
	until := time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)
	want := []audit.Entry{
		{Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Who: "cfo", Action: "set_ceiling", Target: "team:acme/ml:usd-month", Old: 10_000_000.0, New: 20_000_000.0, Until: &until},
		{Time: time.Date(2026, 11, 30, 9, 1, 0, 0, time.UTC), Who: "root", Action: "create_key", Target: "acme/etl", New: map[string]any{"team": "ml"}},
		{Time: time.Date(2026, 11, 30, 9, 2, 0, 0, time.UTC), Who: "root", Action: "revoke_key", Target: "acme/etl", Old: "active", New: "revoked"},
	}
	for _, e := range want {
		if err := log.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := log.List(ctx)
	if err != nil || len(got) != len(want) {
		t.Fatalf("list: %+v %v", got, err)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Time.Equal(w.Time) || g.Who != w.Who || g.Action != w.Action || g.Target != w.Target ||
			(w.Until == nil) != (g.Until == nil) || (w.Until != nil && !g.Until.Equal(*w.Until)) {
			t.Fatalf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	if got[0].Old != 10_000_000.0 || got[2].New != "revoked" || got[1].New.(map[string]any)["team"] != "ml" {
		t.Fatalf("values: %+v", got)
	}
}

package e2e_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
)

// chargeStores are the stores a charging test runs on: one instance on
// the embedded store, and two sharing one Redis.
var chargeStores = []string{"embedded", "redis"}

// storeRig is a gateway config served on one of chargeStores, with every
// instance's settlements collected.
type storeRig struct {
	urls    []string // one per instance
	apps    []*app.App
	mu      sync.Mutex
	entries []budget.Entry
}

// serveOn serves src (a config without a store section) on store: one
// instance on the embedded store, or two sharing a fresh Redis.
func serveOn(t *testing.T, store, src string) *storeRig {
	t.Helper()
	r := &storeRig{}
	instances, vars := 1, map[string]string{}
	if store == "redis" {
		instances = 2
		vars["REDIS"] = redistest.Start(t).Addr
		src = "store:\n  kind: redis\n  redis:\n    addrs:\n      - ${REDIS}\n    spool_path: ${SPOOL}\n    timeout: 3s\n    settle_timeout: 3s\n" + src
	}
	for i := range instances {
		vars["SPOOL"] = filepath.Join(t.TempDir(), "spool.jsonl")
		a := apptest.New(t, src, vars)
		stop := a.Background(context.Background())
		a.Gateway().OnSettle(func(e budget.Entry) { r.mu.Lock(); r.entries = append(r.entries, e); r.mu.Unlock() })
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(func() {
			srv.Close()
			stop()
			if err := a.Close(); err != nil {
				t.Errorf("closing instance %d: %v", i, err)
			}
		})
		r.apps, r.urls = append(r.apps, a), append(r.urls, srv.URL)
	}
	return r
}

// settled waits for n ledger entries, every settlement done, and returns
// the entries.
func (r *storeRig) settled(t *testing.T, n int) []budget.Entry {
	t.Helper()
	ok := testkit.WaitFor(20*time.Second, func() bool {
		r.mu.Lock()
		got := len(r.entries)
		r.mu.Unlock()
		busy := int64(0)
		for _, a := range r.apps {
			busy += a.Gateway().Settling()
		}
		return got >= n && busy == 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || len(r.entries) != n {
		t.Fatalf("%d ledger entries, want %d: %+v", len(r.entries), n, r.entries)
	}
	return append([]budget.Entry(nil), r.entries...)
}

package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// smallDisk mounts a tmpfs of size bytes at a new directory for the test
// (it needs root, as CI runs; on a machine where mount is refused the
// test fails, saying so).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test mounts a small tmpfs to fill it, which needs root (as CI runs): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file that leaves about free bytes of dir's file system.
func fill(t *testing.T, dir string, free int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		var st syscallStatfs
		if err := statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.free() <= free {
			return path
		}
		n := min(int64(len(buf)), st.free()-free)
		if _, err := f.Write(buf[:n]); err != nil {
			return path // full already
		}
	}
}

// A ledger on a disk that fills up: the gateway serves while its entries
// are written, then — the first write refused — admits nothing (503
// ledger_unavailable, nothing reserved or forwarded), fails /readyz and
// counts the failure; the entries it could not write are held, and once
// the disk has room again they are written and the gateway admits again.
// Every request served has its ledger line, and the ledger's spend is the
// budget's: nothing acknowledged is lost.
func TestAFullDiskStopsTheSpendItWouldLose(t *testing.T) {
	disk := smallDisk(t, "256k")
	sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
	ledgerPath := filepath.Join(disk, "ledger.jsonl")
	a := apptest.New(t, `
ledger_path: `+ledgerPath+`
store:
  snapshot_path: `+filepath.Join(t.TempDir(), "snapshot.json")+`
upstreams:
  - {name: openai, base_url: "`+upURL+`/v1", api_key: k, models: [gpt-4o-mini]}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}]
        keys: [{id: k1, hash: "`+policy.HashKey(testKey)+`"}]
`, nil)
	stop := a.Background(context.Background())
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); stop(); a.Close() })
	ask := func() (int, string) {
		return callAs(t, testKey, http.MethodPost, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":20,"messages":[{"role":"user","content":"Tell me about budgets."}]}`)
	}
	readyz := func() int { s, _ := call(t, http.MethodGet, srv.URL+"/readyz", ""); return s }

	filler := fill(t, disk, 6<<10)
	served, refused := 0, 0
	for i := 0; i < 60 && refused < 5; i++ {
		switch status, body := ask(); {
		case status == http.StatusOK:
			if refused > 0 {
				t.Fatalf("request %d served after a refusal, the disk still full", i)
			}
			served++
		case status == http.StatusServiceUnavailable && strings.Contains(body, `"ledger_unavailable"`):
			refused++
		default:
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	if served == 0 || refused == 0 {
		t.Fatalf("%d served, %d refused: the disk never filled", served, refused)
	}
	if s := readyz(); s != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d with the ledger unwritable", s)
	}
	if _, body := call(t, http.MethodGet, srv.URL+"/metrics", ""); !strings.Contains(body, "tollgate_ledger_write_failures_total ") ||
		strings.Contains(body, "tollgate_ledger_write_failures_total 0\n") || strings.Contains(body, "tollgate_ledger_backlog_entries 0\n") {
		t.Fatalf("no ledger failure counted:\n%s", grepLines(body, "tollgate_ledger"))
	}
	sim0 := sim.Stats().Requests

	// Room again: the held entries are written, and the gateway admits.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !testkit.WaitFor(10*time.Second, func() bool { return readyz() == http.StatusOK }) {
		t.Fatal("/readyz still failing with room on the disk")
	}
	for range 3 {
		if status, body := ask(); status != http.StatusOK {
			t.Fatalf("after the disk has room: %d %s", status, body)
		}
		served++
	}
	if got := sim.Stats().Requests - sim0; got != 3 {
		t.Fatalf("the upstream had %d requests while the ledger could not be written", int64(served)-3-sim0+got)
	}
	spent, pending := spentNow(t, a)
	// The client has its answer before the gateway settles, and a
	// settlement is in the budget a moment before its ledger line.
	var lines, recorded int64
	testkit.WaitFor(5*time.Second, func() bool {
		lines, recorded = 0, 0
		if err := ledger.Read(ledgerPath, func(e budget.Entry) error { lines++; recorded += int64(e.Cost); return nil }); err != nil {
			t.Fatal(err)
		}
		return lines == int64(served)
	})
	if lines != int64(served) || recorded != spent || pending != 0 {
		t.Fatalf("%d served, %d ledger lines; the ledger records %d µ$, the budget %d (pending %d)", served, lines, recorded, spent, pending)
	}
	t.Logf("%d served before the disk filled, %d refused while it was full; after: every one of %d served requests in the ledger, %d µ$ = the budget", served-3, refused, served, recorded)
}

// A snapshot path that cannot be written is found at start: the gateway
// does not start, rather than serve without ever saving its state.
func TestAnUnwritableSnapshotPathStopsTheStart(t *testing.T) {
	_, err := app.New(apptest.Config(t, `
store:
  snapshot_path: /proc/tollgate-snapshot.json
upstreams:
  - {name: openai, base_url: "http://127.0.0.1:9/v1", api_key: k, models: [gpt-4o-mini]}
orgs: [{id: acme, teams: [{id: ml}]}]
`, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "snapshot cannot be written") || !strings.Contains(err.Error(), "/proc/tollgate-snapshot.json") {
		t.Fatalf("started with an unwritable snapshot path: %v", err)
	}
}

// The embedded store's journal on a disk that fills up: the gateway serves
// while its records are written, then — the first write refused — admits
// nothing (503 budget_store_unavailable; the reservation whose record
// failed is given back, never forwarded), fails /readyz and counts the
// failure. With room again the next snapshot holds the whole state and the
// gateway admits again. Restarted, it has every µ$ the ledger has.
func TestAFullDiskStopsTheJournal(t *testing.T) {
	disk := smallDisk(t, "256k")
	sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	src := `
ledger_path: ` + ledgerPath + `
store:
  snapshot_path: ` + filepath.Join(disk, "snapshot.json") + `
  snapshot_interval: 1s
upstreams:
  - {name: openai, base_url: "` + upURL + `/v1", api_key: k, models: [gpt-4o-mini]}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$100", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	a := apptest.New(t, src, nil)
	stop := a.Background(context.Background())
	srv := httptest.NewServer(a.Handler())
	ask := func() (int, string) {
		return callAs(t, testKey, http.MethodPost, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":20,"messages":[{"role":"user","content":"Tell me about budgets."}]}`)
	}
	readyz := func() int { s, _ := call(t, http.MethodGet, srv.URL+"/readyz", ""); return s }

	filler := fill(t, disk, 12<<10)
	served, refused := 0, 0
	for i := 0; i < 200 && refused < 5; i++ {
		switch status, body := ask(); {
		case status == http.StatusOK:
			served++
		case status == http.StatusServiceUnavailable && strings.Contains(body, `"budget_store_unavailable"`):
			refused++
		default:
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	if served == 0 || refused == 0 {
		t.Fatalf("%d served, %d refused: the disk never filled", served, refused)
	}
	if s := readyz(); s != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d with the journal unwritable", s)
	}
	if _, body := call(t, http.MethodGet, srv.URL+"/metrics", ""); strings.Contains(body, "tollgate_journal_write_failures_total 0\n") {
		t.Fatalf("no journal failure counted:\n%s", grepLines(body, "tollgate_journal"))
	}
	sim0 := sim.Stats().Requests

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !testkit.WaitFor(10*time.Second, func() bool { return readyz() == http.StatusOK }) {
		t.Fatal("/readyz still failing with room on the disk")
	}
	for range 3 {
		if status, body := ask(); status != http.StatusOK {
			t.Fatalf("after the disk has room: %d %s", status, body)
		}
		served++
	}
	if got := sim.Stats().Requests - sim0; got != 3 {
		t.Fatalf("the upstream had %d requests, want the 3 after the disk had room", got)
	}
	spent, pending := spentNow(t, a)
	srv.Close()
	stop()
	var recorded int64
	testkit.WaitFor(5*time.Second, func() bool {
		recorded = 0
		if err := ledger.Read(ledgerPath, func(e budget.Entry) error { recorded += int64(e.Cost); return nil }); err != nil {
			t.Fatal(err)
		}
		return recorded == spent
	})
	if recorded != spent || pending != 0 {
		t.Fatalf("the ledger records %d µ$, the budget %d (pending %d)", recorded, spent, pending)
	}
	// Killed now (no Close, no last snapshot), then started again: the
	// journal has it all.
	again := apptest.New(t, src, nil)
	t.Cleanup(func() { again.Close() })
	if s2, _ := spentNow(t, again); s2 != spent {
		t.Fatalf("after a restart the budget has %d µ$, before it %d", s2, spent)
	}
	t.Logf("%d served, %d refused while the disk was full; %d µ$ in the ledger = the budget, before and after a restart", served, refused, recorded)
}

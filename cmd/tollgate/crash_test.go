package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// TestMain lets the test binary stand in for the tollgate binary: with
// TOLLGATE_TEST_AS_BINARY=1 it runs the command line it was given, so a
// test can start a gateway as a process of its own and kill it.
func TestMain(m *testing.M) {
	if os.Getenv("TOLLGATE_TEST_AS_BINARY") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// gatewayProcess starts `tollgate serve --config path` as a process of its
// own and waits until it is ready (up to 60 s).
func gatewayProcess(t *testing.T, path, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--config", path)
	cmd.Env = append(os.Environ(), "TOLLGATE_TEST_AS_BINARY=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if !testkit.WaitFor(60*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("the gateway did not get ready:\n%s", out.String())
	}
	return cmd
}

// A single gateway on the embedded store, killed with SIGKILL under load
// from eight clients, then started again, then loaded until its team's
// ceiling refuses. Nothing it acknowledged is lost: the spend before the
// crash comes back from the snapshot and the journal, the requests in
// flight at the crash are charged their reservations, and the upstream
// never bills past the ceiling. Before the journal, the spend since the
// last snapshot (30 s) was forgotten and the team could spend its ceiling
// again (1.96 × in the SRE battery).
func TestAKilledGatewayForgetsNothing(t *testing.T) {
	sim, err := simulated.New(simulated.Options{APIKey: "upstream-secret", Latency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	const key = "tg-crash-test-key"
	const ceiling = 30_000 // µ$: about 270 requests
	cfg := fmt.Sprintf(`
listen: %q
ledger_path: %q
store:
  snapshot_path: %q
  snapshot_interval: 1h
upstreams:
  - {name: sim, base_url: %q, api_key: upstream-secret, models: [test-model]}
models:
  test-model: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$0.03", period: month}]
        keys: [{id: k1, hash: %q, models: [test-model]}]
`, addr, filepath.Join(dir, "ledger.jsonl"), filepath.Join(dir, "state.json"), up.URL+"/v1", policy.HashKey(key))
	path := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	body := `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	var served, exhausted atomic.Int64
	load := func(stopAt int64) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				client := &http.Client{Timeout: 10 * time.Second}
				for served.Load() < stopAt {
					req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						return // the gateway died
					}
					var e struct{ Error struct{ Code string } }
					_ = json.NewDecoder(resp.Body).Decode(&e)
					resp.Body.Close()
					switch resp.StatusCode {
					case 200:
						served.Add(1)
					case 400:
						exhausted.Add(1)
						return
					case 429:
						time.Sleep(10 * time.Millisecond) // held by requests in flight
					default:
						t.Errorf("status %d %s", resp.StatusCode, e.Error.Code)
						return
					}
				}
			})
		}
		wg.Wait()
	}

	gw := gatewayProcess(t, path, addr)
	done := make(chan struct{})
	go func() { load(1 << 40); close(done) }()
	if !testkit.WaitFor(60*time.Second, func() bool { return served.Load() >= 120 }) {
		t.Fatalf("only %d served", served.Load())
	}
	if err := gw.Process.Kill(); err != nil { // SIGKILL, with requests in flight
		t.Fatal(err)
	}
	_ = gw.Wait()
	<-done
	before := served.Load()

	gatewayProcess(t, path, addr)
	load(1 << 40)
	if exhausted.Load() == 0 {
		t.Fatal("the load never reached the ceiling")
	}
	billed := sim.Stats().Usage["test-model"]
	truth := billed.PromptTokens + 2*billed.CompletionTokens
	used := budgetUsed(t, addr, key)
	var recorded int64
	expired := 0
	if err := ledger.Read(filepath.Join(dir, "ledger.jsonl"), func(e budget.Entry) error {
		recorded += int64(e.Cost)
		if e.Outcome == budget.Expired.String() {
			expired++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d served before the kill, %d in all; upstream billed %d µ$, budget %d, ledger %d (%d in flight at the kill, charged as expired), ceiling %d",
		before, served.Load(), truth, used, recorded, expired, ceiling)
	if truth > ceiling {
		t.Errorf("the upstream billed %d µ$ past the ceiling of %d", truth, ceiling)
	}
	if used < truth || used > ceiling {
		t.Errorf("the budget holds %d µ$: want at least the %d billed, at most the ceiling %d", used, truth, ceiling)
	}
	// The requests in flight at the kill are in the ledger at their
	// reservations, as expired; a settlement killed between its journal
	// record and its ledger line is put in the ledger at the restart.
	if recorded < truth || recorded != used {
		t.Errorf("the ledger holds %d µ$: want the budget's %d, at least the %d billed", recorded, used, truth)
	}
}

// budgetUsed is the key's month budget's use as GET /v1/budget shows it.
func budgetUsed(t *testing.T, addr, key string) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/budget", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Limits []struct {
			Name string
			Used int64
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for _, l := range got.Limits {
		if l.Name == "usd-month" {
			return l.Used
		}
	}
	t.Fatalf("no usd-month in %+v", got)
	return 0
}

package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// A reload (SIGHUP) that raises a team's ceiling: the new one is what
// the gateway enforces, and what the admin API shows and the audit trail
// records — one truth, not the old ceiling shown beside the new one
// enforced.
func TestAReloadedCeilingIsTheOneShown(t *testing.T) {
	_, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.yaml")
	write := func(ceiling string) {
		src := `
audit_path: ` + filepath.Join(dir, "audit.jsonl") + `
admin_tokens: [{name: root, hash: "` + policy.HashKey(adminToken) + `", role: admin}]
upstreams: [{name: sim, base_url: "` + upURL + `/v1", api_key: k, models: [gpt-4o-mini]}]
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + ceiling + `", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("$0.005")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := a.Background(context.Background())
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); stop(); a.Close() })

	shown := func() int64 {
		status, body := adminCall(t, http.MethodGet, srv.URL+"/admin/v1/ceilings?org=acme&team=ml", adminToken, "")
		var v struct {
			Budgets []struct {
				Configured int64 `json:"configured"`
				InForce    int64 `json:"in_force"`
			} `json:"budgets"`
		}
		if status != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Budgets) != 1 || v.Budgets[0].Configured != v.Budgets[0].InForce {
			t.Fatalf("ceilings: %d %s", status, body)
		}
		return v.Budgets[0].InForce
	}
	big := `{"model":"gpt-4o-mini","max_tokens":16000,"messages":[{"role":"user","content":"hi"}]}` // ~$0.0096 of output
	if got := shown(); got != 5_000 {
		t.Fatalf("before the reload the API shows %d µ$", got)
	}
	if status, body := callAs(t, testKey, http.MethodPost, srv.URL+"/v1/chat/completions", big); !budgetRefused(status, body) {
		t.Fatalf("a request past the $0.005 ceiling: %d %s", status, body)
	}
	write("$5")
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	if got := shown(); got != 5_000_000 {
		t.Fatalf("after reloading $5 the API shows %d µ$", got)
	}
	if status, body := callAs(t, testKey, http.MethodPost, srv.URL+"/v1/chat/completions", big); status != 200 {
		t.Fatalf("a request the reloaded ceiling admits: %d %s", status, body)
	}
	status, body := adminCall(t, http.MethodGet, srv.URL+"/admin/v1/audit", adminToken, "")
	if status != 200 || !strings.Contains(body, `"who":"config reload"`) || !strings.Contains(body, `"action":"config_limit"`) ||
		!strings.Contains(body, `"old":5000`) || !strings.Contains(body, `"new":5000000`) {
		t.Fatalf("audit after the reload: %d %s", status, body)
	}
}

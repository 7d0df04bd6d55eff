package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/memstore"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/policy"
)

// Every route of the OpenAPI document, for every role: no token is 401, a
// wrong one 401, a role the document's x-roles does not list 403, and a
// role it lists is let through (whatever the handler then answers). The
// document is kept equal to the mounted routes by TestOpenAPIMatchesRoutes,
// so this covers every admin route.
func TestEveryRouteChecksItsRoles(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Roles *[]string `json:"x-roles"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(admin.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	src := `
admin_tokens:
  - {name: root, hash: "` + policy.HashKey("tg-admin") + `", role: admin}
  - {name: cfo, hash: "` + policy.HashKey("tg-finance") + `", role: finance}
  - {name: lead, hash: "` + policy.HashKey("tg-viewer") + `", role: viewer, teams: [acme/search]}
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$1", max_output_tokens: 10}}
orgs: [{id: acme, teams: [{id: ml, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]},
                          {id: search, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]}]}]
`
	cfg, err := config.Parse([]byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	admin.New(cfg, budget.NewEngine(mem, 0), nil).Mount(e)
	srv := httptest.NewServer(e)
	defer srv.Close()
	tokens := map[string]string{"admin": "tg-admin", "finance": "tg-finance", "viewer": "tg-viewer"}
	n := 0
	for path, ops := range doc.Paths {
		url := srv.URL + strings.NewReplacer("{org}", "acme", "{id}", "k1").Replace(path)
		for method, op := range ops {
			if op.Roles == nil {
				t.Errorf("%s %s: no x-roles in the document", method, path)
				continue
			}
			public := len(*op.Roles) == 0
			call := func(token string) int {
				req, _ := http.NewRequest(strings.ToUpper(method), url, strings.NewReader(`{}`))
				req.Header.Set("Content-Type", "application/json")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for _, token := range []string{"", "tg-wrong"} {
				if got := call(token); public == (got == 401) {
					t.Errorf("%s %s with token %q: %d", method, path, token, got)
				}
			}
			for role, token := range tokens {
				got := call(token)
				allowed := public || slices.Contains(*op.Roles, role)
				if allowed && (got == 401 || got == 403) || !allowed && got != 403 {
					t.Errorf("%s %s as %s (x-roles %v): %d", method, path, role, *op.Roles, got)
				}
				n++
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d role checks: the document lost its routes", n)
	}
}

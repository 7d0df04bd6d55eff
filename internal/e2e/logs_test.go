package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// Every error the gateway answers — a 400 naming a field, a 404, a 401, a
// budget's 429, an upstream's failure — logs one line an operator can act
// on: the route, the key and team where the key was known, the status,
// the code and the field; and every served request's line has its route.
func TestEveryErrorIsLogged(t *testing.T) {
	_, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
	src := `
upstreams:
  - {name: openai, base_url: "` + upURL + `/v1", api_key: k, models: [gpt-4o-mini]}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$0.001", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	var logs syncBuffer
	a, err := app.New(apptest.Config(t, src, nil), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop := a.Background(context.Background())
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); stop(); a.Close() })

	for _, c := range []struct {
		method, path, key, body string
		status                  int
	}{
		{"POST", "/v1/chat/completions", testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`, 200},
		{"POST", "/v1/chat/completions", testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"plugins":[]}`, 400},
		{"POST", "/v1/chat/completions", testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":16000}`, 400},
		{"POST", "/v1/chat/completions", testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"plugins":[]}`, 400},
		{"POST", "/v1/nothing-here", testKey, `{}`, 404},
		{"POST", "/v1/chat/completions", "", `{}`, 401},
	} {
		status, body := callAs(t, c.key, c.method, srv.URL+c.path, c.body)
		if status != c.status {
			t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, status, c.status, body)
		}
	}
	find := func(msg string, status float64) map[string]any {
		for _, l := range logs.lines(t) {
			if l["msg"] == msg && (status == 0 || l["status"] == status) {
				return l
			}
		}
		t.Fatalf("no %q line with status %v in:\n%s", msg, status, logs.b.String())
		return nil
	}
	findCode := func(code string) map[string]any {
		for _, l := range logs.lines(t) {
			if l["msg"] == "refused" && l["code"] == code {
				return l
			}
		}
		t.Fatalf("no refusal with code %q in:\n%s", code, logs.b.String())
		return nil
	}
	want := func(l map[string]any, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if got, _ := l[kv[i]].(string); got != kv[i+1] {
				t.Errorf("%v: %s = %q, want %q", l, kv[i], got, kv[i+1])
			}
		}
	}
	want(find("request", 0), "route", "/v1/chat/completions", "team", "ml", "key", "k1")
	want(findCode("invalid_request"), "route", "/v1/chat/completions", "team", "ml", "key", "k1", "param", "plugins")
	want(findCode("request_exceeds_budget_remaining"), "route", "/v1/chat/completions", "team", "ml", "key", "k1", "scope", "team", "limit", "usd-month")
	want(find("refused", 404), "route", "/v1/nothing-here", "code", "unknown_url")
	want(find("refused", 401), "route", "/v1/chat/completions", "code", "missing_api_key")
	for _, l := range logs.lines(t) {
		if l["msg"] == "refused" && l["request_id"] == "" && l["status"] != float64(401) && l["status"] != float64(404) {
			t.Errorf("a refusal without its request id: %v", l)
		}
	}
}

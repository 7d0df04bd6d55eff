package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// chatAs sends one chat request with key to url and returns the status.
func chatAs(t *testing.T, url, key, model string) int {
	t.Helper()
	status, _ := postJSON(t, url+"/v1/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
	return status
}

func postJSON(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	return adminCall(t, "POST", url, key, body)
}

// An admin makes a key on one instance and it works on the other within
// the refresh interval; revoked on the other, it stops at once there and
// within the interval on the first. Only admins may; every change is
// audited; the plain key is stored nowhere.
func TestAPIKeysAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`,
		redisAddr:  srv.Addr, instances: 2, spoolDir: t.TempDir(),
		topExtra: fmt.Sprintf("audit_path: %s\nadmin_tokens:\n  - {name: root, hash: %q, role: admin}\n  - {name: cfo, hash: %q, role: finance}\n",
			audit, policy.HashKey(adminToken), policy.HashKey(financeToken)),
		sim: simulated.Options{},
	})
	keys := func(i int) string { return h.urls[i] + "/admin/v1/keys" }
	good := `{"org":"acme","team":"ml","id":"ci-bot","models":["test-model"]}`
	for _, tc := range []struct {
		desc, method, url, token, body string
		want                           int
	}{
		{"no token", "POST", keys(0), "", good, 401},
		{"finance making a key", "POST", keys(0), financeToken, good, 403},
		{"finance listing keys", "GET", keys(0), financeToken, "", 403},
		{"finance revoking a key", "DELETE", keys(0) + "/acme/k1", financeToken, "", 403},
		{"a team that does not exist", "POST", keys(0), adminToken, `{"org":"acme","team":"nope","id":"x"}`, 404},
		{"an id a config key has", "POST", keys(0), adminToken, `{"org":"acme","team":"ml","id":"k2"}`, 409},
		{"an id with a space", "POST", keys(0), adminToken, `{"org":"acme","team":"ml","id":"a b"}`, 400},
		{"a model not configured", "POST", keys(0), adminToken, `{"org":"acme","team":"ml","id":"x","models":["gpt-9"]}`, 400},
		{"a plan not configured", "POST", keys(0), adminToken, `{"org":"acme","team":"ml","id":"x","plan":"gold"}`, 400},
		{"no id", "POST", keys(0), adminToken, `{"org":"acme","team":"ml"}`, 400},
		{"revoking a config key", "DELETE", keys(0) + "/acme/k1", adminToken, "", 409},
		{"revoking a key that does not exist", "DELETE", keys(0) + "/acme/nope", adminToken, "", 404},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if status, body := adminCall(t, tc.method, tc.url, tc.token, tc.body); status != tc.want {
				t.Fatalf("%d %s, want %d", status, body, tc.want)
			}
		})
	}

	status, body := adminCall(t, "POST", keys(0), adminToken, good)
	var made struct{ Key, ID string }
	if err := json.Unmarshal([]byte(body), &made); status != 201 || err != nil || !strings.HasPrefix(made.Key, "tg-") {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := adminCall(t, "POST", keys(1), adminToken, good); status != 409 {
		t.Fatalf("the same id again, on the other instance: %d %s", status, body)
	}
	if got := chatAs(t, h.urls[0], made.Key, "test-model"); got != 200 {
		t.Fatalf("the new key on the instance that made it: %d", got)
	}
	// Asked directly, not by requests: every refused one would count
	// against the address's failed authentications.
	knows := func(i int, key string) bool {
		gw := h.apps[i].Gateway()
		_, ok := gw.Lookup(gw.Settings(), key)
		return ok
	}
	start := time.Now()
	if !testkit.WaitFor(5*time.Second, func() bool { return knows(1, made.Key) }) || chatAs(t, h.urls[1], made.Key, "test-model") != 200 {
		t.Fatal("the other instance never accepted the new key")
	}
	t.Logf("accepted by the other instance after %v", time.Since(start).Round(time.Millisecond))
	if got := chatAs(t, h.urls[1], made.Key, "gpt-4o"); got != 403 {
		t.Fatalf("a model outside the key's list: %d", got)
	}
	if spent, _ := h.redisSpent(); spent == 0 {
		t.Fatal("the new key's requests were not charged to its team")
	}

	status, body = adminCall(t, "GET", keys(1)+"?org=acme&team=ml", adminToken, "")
	var list []policy.KeyView
	if err := json.Unmarshal([]byte(body), &list); status != 200 || err != nil || len(list) != 4 {
		t.Fatalf("list: %d %s", status, body)
	}
	if strings.Contains(body, "sha256") || strings.Contains(body, made.Key) {
		t.Fatalf("the list shows key material: %s", body)
	}
	if l := list[3]; l.ID != "ci-bot" || l.Source != "admin" || l.CreatedBy != "root" || l.RevokedAt != nil || list[0].Source != "config" {
		t.Fatalf("list: %+v", list)
	}

	// Revoked on instance 1: refused there at once, on instance 0 soon.
	status, body = adminCall(t, "DELETE", keys(1)+"/acme/ci-bot", adminToken, "")
	if status != 200 || !strings.Contains(body, `"revoked_by":"root"`) {
		t.Fatalf("revoke: %d %s", status, body)
	}
	if got := chatAs(t, h.urls[1], made.Key, "test-model"); got != 401 {
		t.Fatalf("the revoked key on the instance that revoked it: %d", got)
	}
	start = time.Now()
	if !testkit.WaitFor(5*time.Second, func() bool { return !knows(0, made.Key) }) || chatAs(t, h.urls[0], made.Key, "test-model") != 401 {
		t.Fatal("the other instance still accepts the revoked key")
	}
	t.Logf("refused by the other instance after %v", time.Since(start).Round(time.Millisecond))
	if status, again := adminCall(t, "DELETE", keys(0)+"/acme/ci-bot", adminToken, ""); status != 200 || again != body {
		t.Fatalf("revoking again: %d %s, want the first revocation %s", status, again, body)
	}

	// Audited once each, in the trail every instance reads (the change on
	// instance 0 and the one on instance 1 both); the local copy holds
	// this instance's changes. The plain key is in none, nor in Redis.
	for i := range 2 {
		_, trail := adminCall(t, "GET", h.urls[i]+"/admin/v1/audit", adminToken, "")
		if strings.Count(trail, `"action":"create_key"`) != 1 || strings.Count(trail, `"action":"revoke_key"`) != 1 ||
			strings.Contains(trail, made.Key) {
			t.Fatalf("audit trail on instance %d:\n%s", i, trail)
		}
	}
	local, err := os.ReadFile(audit)
	if err != nil || !strings.Contains(string(local), `"action":"create_key"`) || strings.Contains(string(local), made.Key) {
		t.Fatalf("local copy of the trail (%v):\n%s", err, local)
	}
	stored, err := h.rdb.HGetAll(ctx, "tg:{keys}:all").Result()
	if err != nil || len(stored) != 1 || strings.Contains(fmt.Sprint(stored), made.Key) ||
		!strings.Contains(fmt.Sprint(stored), policy.HashKey(made.Key)) {
		t.Fatalf("registry: %v %v", stored, err)
	}
}

package e2e_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/httpapi"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

const bypassSecret = "0123456789abcdef0123456789abcdef-billing"

func TestSignedBypass(t *testing.T) {
	h := startWith(t, setup{
		teamLimits: monthlyTen + `, {name: rpm, kind: rate, unit: requests, amount: 1, window: 1m}`,
		topExtra:   "bypass:\n  secrets: [{id: billing-svc, secret: " + bypassSecret + "}]\n",
	})
	var mu sync.Mutex
	var entries []budget.Entry
	h.app.Gateway().OnSettle(func(e budget.Entry) { mu.Lock(); entries = append(entries, e); mu.Unlock() })
	path := "/v1/chat/completions"
	body := `{"model":"test-model","messages":[{"role":"user","content":"internal job"}]}`
	if resp, _ := h.post(path, testKey, body, nil); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	if resp, _ := h.post(path, testKey, body, nil); resp.StatusCode != 429 {
		t.Fatalf("second request under 1 rpm: %d", resp.StatusCode)
	}
	now := time.Now()
	valid := gateway.Sign([]byte(bypassSecret), "POST", path, []byte(body), now, "nonce-1")
	if resp, eb := h.post(path, testKey, body, map[string]string{httpapi.SignatureHeader: valid}); resp.StatusCode != 200 {
		t.Fatalf("a valid signature: %d %s", resp.StatusCode, eb.Error.Code)
	}
	// The query string is signed too: a signature over one target does not
	// verify for another.
	withQuery := gateway.Sign([]byte(bypassSecret), "POST", path+"?tenant=a", []byte(body), now, "nonce-q")
	if resp, eb := h.post(path+"?tenant=a", testKey, body, map[string]string{httpapi.SignatureHeader: withQuery}); resp.StatusCode != 200 {
		t.Fatalf("a valid signature over a query: %d %s", resp.StatusCode, eb.Error.Code)
	}
	if resp, eb := h.post(path+"?tenant=b", testKey, body, map[string]string{httpapi.SignatureHeader: gateway.Sign([]byte(bypassSecret), "POST", path+"?tenant=a", []byte(body), now, "nonce-q2")}); resp.StatusCode != 401 || eb.Error.Code != "invalid_bypass_signature" {
		t.Fatalf("another query under the same signature: %d %s", resp.StatusCode, eb.Error.Code)
	}
	for _, tc := range []struct{ desc, header, body string }{
		{"replayed", valid, body},
		{"altered body", gateway.Sign([]byte(bypassSecret), "POST", path, []byte(body), now, "nonce-2"), strings.Replace(body, "internal", "external", 1)},
		{"skew over 300 s", gateway.Sign([]byte(bypassSecret), "POST", path, []byte(body), now.Add(-301*time.Second), "nonce-3"), body},
		{"wrong secret", gateway.Sign([]byte("another-secret-of-enough-length-000"), "POST", path, []byte(body), now, "nonce-4"), body},
		{"garbage", "t=1,n=x,s=zz", body},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, eb := h.post(path, testKey, tc.body, map[string]string{httpapi.SignatureHeader: tc.header})
			if resp.StatusCode != 401 || eb.Error.Code != "invalid_bypass_signature" {
				t.Fatalf("%d %s", resp.StatusCode, eb.Error.Code)
			}
		})
	}
	// An unlimited key is never refused, and is counted as a bypass.
	for range 3 {
		if resp, _ := h.post(path, unlimitedKey, body, nil); resp.StatusCode != 200 {
			t.Fatalf("unlimited key: %d", resp.StatusCode)
		}
	}
	if spent, _ := h.spent(teamMonth); spent != h.reportedCost("test-model") {
		t.Fatalf("bypassed requests must still be charged: spent %d, reported %d", spent, h.reportedCost("test-model"))
	}
	// The ledger hears of a settlement after the client has its answer.
	testkit.WaitFor(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(entries) >= 6
	})
	mu.Lock()
	defer mu.Unlock()
	byWho := map[string]int{}
	for _, e := range entries {
		byWho[e.Bypass]++
	}
	if byWho["billing-svc"] != 2 || byWho["unlimited-key"] != 3 || byWho[""] != 1 {
		t.Fatalf("ledger entries by bypass: %v", byWho)
	}
	if got := value(t, h.scrape(), "tollgate_bypasses_total", map[string]string{"by": "billing-svc", "team": "ml"}); got != 2 {
		t.Fatalf("bypass counter %v", got)
	}
}

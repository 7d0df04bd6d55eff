package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// post sends a raw request with curl-like control over headers and body.
func (h *harness) post(path, key, body string, hdr map[string]string) (*http.Response, errorBody) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb errorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
			h.t.Fatalf("status %d with a body that is not OpenAI error JSON: %s", resp.StatusCode, raw)
		}
	}
	return resp, eb
}

func TestBadInputLeavesNoTrace(t *testing.T) {
	h := start(t, monthlyTen+`, {name: rpm, kind: rate, unit: requests, amount: 1000, window: 1m}`, simulated.Options{})
	chat := "/v1/chat/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		desc, path, key, body string
		hdr                   map[string]string
		status                int
		code                  string
	}{
		{"no key", chat, "", `{"model":"test-model",` + msgs + `}`, nil, 401, "missing_api_key"},
		{"wrong key", chat, "tg-wrong", `{"model":"test-model",` + msgs + `}`, nil, 401, "invalid_api_key"},
		{"key in x-api-key works but is wrong", chat, "", `{}`, map[string]string{"x-api-key": "nope"}, 401, "invalid_api_key"},
		{"unknown model", chat, testKey, `{"model":"gpt-9",` + msgs + `}`, nil, 400, "model_not_found"},
		{"not JSON", chat, testKey, `{"model":`, nil, 400, "invalid_request"},
		{"no messages", chat, testKey, `{"model":"test-model"}`, nil, 400, "invalid_request"},
		{"negative max_tokens", chat, testKey, `{"model":"test-model","max_tokens":-1,` + msgs + `}`, nil, 400, "invalid_request"},
		{"zero max_tokens", chat, testKey, `{"model":"test-model","max_completion_tokens":0,` + msgs + `}`, nil, 400, "invalid_request"},
		{"fractional max_tokens", chat, testKey, `{"model":"test-model","max_tokens":10.5,` + msgs + `}`, nil, 400, "invalid_request"},
		{"string max_tokens", chat, testKey, `{"model":"test-model","max_tokens":"10",` + msgs + `}`, nil, 400, "invalid_request"},
		{"max_tokens above the model's", chat, testKey, `{"model":"test-model","max_tokens":1001,` + msgs + `}`, nil, 400, "invalid_request"},
		{"both caps", chat, testKey, `{"model":"test-model","max_tokens":5,"max_completion_tokens":5,` + msgs + `}`, nil, 400, "invalid_request"},
		{"audio part cannot be bounded", chat, testKey, `{"model":"test-model","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, nil, 400, "invalid_request"},
		{"embedding model on chat", chat, testKey, `{"model":"text-embedding-3-small",` + msgs + `}`, nil, 400, "invalid_request"},
		{"streaming embeddings", "/v1/embeddings", testKey, `{"model":"text-embedding-3-small","input":"x","stream":true}`, nil, 400, "invalid_request"},
		{"too large", chat, testKey, `{"model":"test-model",` + msgs + `,"pad":"` + strings.Repeat("x", 9<<20) + `"}`, nil, 413, "request_too_large"},
		{"unknown route", "/v1/images/generations", testKey, `{}`, nil, 404, "unknown_url"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, eb := h.post(tc.path, tc.key, tc.body, tc.hdr)
			if resp.StatusCode != tc.status || eb.Error.Code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", resp.StatusCode, eb.Error.Code, eb.Error.Message, tc.status, tc.code)
			}
		})
	}
	if spent, pending := h.spent(teamMonth); spent != 0 || pending != 0 {
		t.Fatalf("bad input left spent=%d pending=%d", spent, pending)
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("bad input reached the upstream %d times", h.upCalls.Load())
	}
	// The rate bucket was not touched either: 1000 requests remain.
	resp, _ := h.post(chat, testKey, `{"model":"test-model",`+msgs+`}`, nil)
	if got := resp.Header.Get("RateLimit"); !strings.Contains(got, `"team-rpm";r=999;`) {
		t.Fatalf("RateLimit after one good request = %q, want r=999", got)
	}
}

func TestModelNotAllowedForKey(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	resp, eb := h.post("/v1/chat/completions", narrowKey, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 403 || eb.Error.Code != "model_not_allowed" {
		t.Fatalf("got %d %q, want 403 model_not_allowed", resp.StatusCode, eb.Error.Code)
	}
	resp, _ = h.post("/v1/chat/completions", narrowKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("the narrow key's own model: status %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+narrowKey)
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	_ = json.NewDecoder(mresp.Body).Decode(&list)
	if len(list.Data) != 1 || list.Data[0].ID != "test-model" {
		t.Fatalf("/v1/models for the narrow key = %+v", list)
	}
}

func TestUpstreamErrorReleasesReservation(t *testing.T) {
	// The upstream expects another key, so it answers 401 to everything:
	// the gateway's credentials are wrong, not the client's key, and the
	// client is told so with a 502 — a 401 would send it after its own key.
	h := start(t, monthlyTen+`, {name: rpm, kind: rate, unit: requests, amount: 10, window: 1m}`, simulated.Options{APIKey: "another-secret"})
	resp, eb := h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 502 || eb.Error.Code != "upstream_credentials_refused" || resp.Header.Get("X-Tollgate-Upstream") != "sim" ||
		resp.Header.Get("X-Tollgate-Upstream-Status") != "401" || !strings.Contains(eb.Error.Message, "refused the gateway's credentials (HTTP 401: ") {
		t.Fatalf("got %d %q %q, want a 502 naming the upstream's 401", resp.StatusCode, eb.Error.Code, eb.Error.Message)
	}
	if spent, pending := h.spent(teamMonth); spent != 0 || pending != 0 {
		t.Fatalf("a failed upstream call left spent=%d pending=%d", spent, pending)
	}
	resp, _ = h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil)
	if got := resp.Header.Get("RateLimit"); !strings.Contains(got, `"team-rpm";r=9;`) {
		t.Fatalf("RateLimit = %q: the failed request's reservation was not released (want r=9)", got)
	}
}

func TestConcurrentRequestsNeverPassTheCeiling(t *testing.T) {
	// Every request is the same: the same prompt, max_tokens 50, and a
	// reply of exactly 50 tokens, so estimate == actual and there are no
	// refunds to make room mid-run. One request costs prompt + 2×50 µ$.
	const body = `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"same prompt for everyone"}]}`
	full := simulated.Options{ReplyTokens: func(uint64) int64 { return 1 << 20 }}
	probe := start(t, monthlyTen, full)
	resp, _ := probe.post("/v1/chat/completions", testKey, body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("probe status %d", resp.StatusCode)
	}
	perRequest := probe.reportedCost("test-model")
	ceiling := 100*perRequest + perRequest - 1
	limits := `{name: usd-month, kind: budget, unit: usd, amount: "` + strconv.FormatInt(ceiling, 10) + ` µ$", period: month}`

	for _, tc := range []struct {
		desc string
		su   func() setup
	}{
		{"one instance, embedded store", func() setup { return setup{teamLimits: limits, sim: full} }},
		{"four instances sharing Redis", func() setup {
			return setup{teamLimits: limits, sim: full, redisAddr: redistest.Start(t).Addr, instances: 4, spoolDir: t.TempDir()}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := startWith(t, tc.su())
			var ok, refused atomic.Int64
			var wg sync.WaitGroup
			tr := &http.Transport{MaxIdleConnsPerHost: 500}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			for i := range 500 {
				wg.Go(func() {
					status, _, b, err := send(client, h.urls[i%len(h.urls)], body)
					switch {
					case err != nil:
						t.Error(err)
					case status == 200:
						ok.Add(1)
					case budgetRefused(status, b):
						refused.Add(1)
					default:
						t.Errorf("status %d", status)
					}
				})
			}
			wg.Wait()
			if ok.Load() != 100 || refused.Load() != 400 {
				t.Fatalf("admitted %d, refused %d; want exactly 100 and 400", ok.Load(), refused.Load())
			}
			var spent, pending int64
			if h.rdb != nil {
				spent, pending = h.redisSpent()
			} else {
				spent, pending = h.spent(teamMonth)
			}
			if spent > ceiling || pending != 0 {
				t.Fatalf("spent %d (ceiling %d), pending %d", spent, ceiling, pending)
			}
			if reported := h.reportedCost("test-model"); spent != reported {
				t.Fatalf("spent %d µ$, upstream reported usage worth %d µ$", spent, reported)
			}
		})
	}
}

// A client that hangs up mid-stream does not stop the upstream, which
// generates and bills the rest: the gateway reads the stream to its end,
// unrelayed, and charges its usage, exactly what the upstream billed.
func TestClientDisconnectIsChargedWhatTheUpstreamBilled(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{
		ReplyTokens: func(uint64) int64 { return 400 },
		ChunkDelay:  5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"long story"}]}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read ten events, then hang up.
	sc := bufio.NewScanner(resp.Body)
	var delivered strings.Builder
	events := 0
	for events < 10 && sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "data: "); ok {
			events++
			var c struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			_ = json.Unmarshal([]byte(rest), &c)
			for _, ch := range c.Choices {
				delivered.WriteString(ch.Delta.Content)
			}
		}
	}
	cancel()
	resp.Body.Close()

	var spent, pending int64
	testkit.WaitFor(5*time.Second, func() bool {
		spent, pending = h.spent(teamMonth)
		return pending == 0 && spent > 0
	})
	if pending != 0 || spent == 0 {
		t.Fatalf("after disconnect spent=%d pending=%d: the stream was not settled", spent, pending)
	}
	st := h.sim.Stats().Usage["test-model"]
	deliveredTokens := int64(strings.Count(delivered.String(), " ")) - 1
	if billed := st.BilledPromptTokens + 2*st.BilledCompletionTokens; spent != billed || st.BilledCompletionTokens != 400 || deliveredTokens >= 400 {
		t.Fatalf("charged %d µ$; the upstream billed %d (%+v), of which ~%d output tokens reached the client", spent, billed, st, deliveredTokens)
	}
}

func TestSDKSeesTypedErrorsForAuth(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	c := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey("tg-nope"), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(ctx, chatParams("test-model", "x"))
	var apierr *openai.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != 401 || apierr.Code != "invalid_api_key" {
		t.Fatalf("err = %v", err)
	}
}

// The N+1th failed authentication from one address gets 429 with
// Retry-After; another address is not affected; a proxy's X-Forwarded-For
// is believed only from a trusted proxy.
func TestBruteForceIsThrottledPerIP(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	// The harness config leaves auth_failures at its default: 30 a minute,
	// and trusts no proxy, so X-Forwarded-For is ignored.
	for i := range 30 {
		resp, eb := h.post("/v1/chat/completions", "tg-guess-"+strconv.Itoa(i), `{}`, map[string]string{"X-Forwarded-For": "203.0.113." + strconv.Itoa(i)})
		if resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d %s", i, resp.StatusCode, eb.Error.Code)
		}
	}
	resp, eb := h.post("/v1/chat/completions", "tg-guess-31", `{}`, nil)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || eb.Error.Code != "too_many_auth_failures" || ra < 1 || ra > 60 {
		t.Fatalf("31st failure: %d %s Retry-After %q", resp.StatusCode, eb.Error.Code, resp.Header.Get("Retry-After"))
	}
	// The lockout locks out what cannot prove itself: another wrong key
	// is refused until Retry-After, unread, while the right key from the
	// same address — a healthy app beside the one retrying a stale key —
	// is served.
	resp, eb = h.post("/v1/chat/completions", "tg-guess-32", `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 429 || eb.Error.Code != "too_many_auth_failures" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a wrong key from a locked-out address: %d %s", resp.StatusCode, eb.Error.Code)
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("a locked-out address reached the upstream with a wrong key")
	}
	if resp, eb = h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != 200 {
		t.Fatalf("a valid key from a locked-out address: %d %s", resp.StatusCode, eb.Error.Code)
	}
}

// Behind a trusted proxy, the lockout is per client address: the locked one
// is refused a wrong key without counting it, another one is not locked;
// the right key is served from either.
func TestLockoutIsPerAddress(t *testing.T) {
	h := startWith(t, setup{teamLimits: monthlyTen, topExtra: "trusted_proxies: [127.0.0.1/32, \"::1/128\"]\nauth_failures: {limit: 5, window: 1m}\n"})
	from := func(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }
	chat := `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`
	for i := range 5 {
		if resp, _ := h.post("/v1/chat/completions", "tg-guess-"+strconv.Itoa(i), chat, from("203.0.113.1")); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
	}
	if resp, eb := h.post("/v1/chat/completions", "tg-guess-5", chat, from("203.0.113.1")); resp.StatusCode != 429 || eb.Error.Code != "too_many_auth_failures" {
		t.Fatalf("a wrong key from the locked address: %d %s", resp.StatusCode, eb.Error.Code)
	}
	if resp, _ := h.post("/v1/chat/completions", "tg-guess-5", chat, from("203.0.113.2")); resp.StatusCode != 401 {
		t.Fatalf("a wrong key from another address: %d", resp.StatusCode)
	}
	for _, ip := range []string{"203.0.113.1", "203.0.113.2"} {
		if resp, _ := h.post("/v1/chat/completions", testKey, chat, from(ip)); resp.StatusCode != 200 {
			t.Fatalf("the right key from %s: %d", ip, resp.StatusCode)
		}
	}
}

// A route may weigh more than one request.
func TestRouteCosts(t *testing.T) {
	h := startWith(t, setup{
		teamLimits: monthlyTen + `, {name: rpm, kind: rate, unit: requests, amount: 10, window: 1m}`,
		topExtra:   "route_costs: {/v1/embeddings: 5}\n",
	})
	emb := `{"model":"text-embedding-3-small","input":"x"}`
	for i := range 2 {
		if resp, _ := h.post("/v1/embeddings", testKey, emb, nil); resp.StatusCode != 200 {
			t.Fatalf("embedding %d: %d", i, resp.StatusCode)
		}
	}
	if resp, eb := h.post("/v1/embeddings", testKey, emb, nil); resp.StatusCode != 429 || eb.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("third embedding (15 of 10 requests): %d %s", resp.StatusCode, eb.Error.Code)
	}
}

// The client's key and any internal or made-up header stay at the gateway.
func TestClientHeadersAreNotForwarded(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	resp, _ := h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Tollgate-User": "alice", "X-Internal-Auth": "secret", "Cookie": "session=1", "X-Forwarded-For": "1.2.3.4"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h.upMu.Lock()
	defer h.upMu.Unlock()
	got := h.upHeader
	if got.Get("Authorization") != "Bearer upstream-secret" {
		t.Fatalf("upstream Authorization = %q", got.Get("Authorization"))
	}
	for _, k := range []string{"X-Tollgate-User", "X-Internal-Auth", "Cookie", "X-Forwarded-For"} {
		if got.Get(k) != "" {
			t.Fatalf("%s reached the upstream", k)
		}
	}
}

// A key holder sees its own budget: spend, remaining and reset, and
// nothing of other teams.
func TestOwnBudget(t *testing.T) {
	h := start(t, monthlyTen+`, {name: rpm, kind: rate, unit: requests, amount: 100, window: 1m}`, simulated.Options{})
	if resp, _ := h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	spent, _ := h.spent(teamMonth)
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/budget", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Team   string
		Limits []struct {
			Scope, Name, Unit      string
			Limit, Used, Remaining int64
			RemainingUSD           string    `json:"remaining_usd"`
			ResetsAt               time.Time `json:"resets_at"`
		}
		Spend []struct {
			Model string
			Day   int64 `json:"day_usd_micros"`
			Month int64 `json:"month_usd_micros"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if got.Team != "ml" || len(got.Limits) != 2 {
		t.Fatalf("budget %+v", got)
	}
	b := got.Limits[0]
	if b.Name != "usd-month" || b.Used != spent || b.Remaining != 10_000_000-spent || b.ResetsAt.Day() != 1 {
		t.Fatalf("month budget %+v, spent %d", b, spent)
	}
	if r := got.Limits[1]; r.Name != "rpm" || r.Limit != 100 || r.Remaining != 99 {
		t.Fatalf("rate limit %+v", r)
	}
	// The key's spend by model, from the store's meters, equals the team's
	// spend (one key, one model used).
	if len(got.Spend) != 1 || got.Spend[0].Model != "test-model" || got.Spend[0].Month != spent || got.Spend[0].Day != spent {
		t.Fatalf("spend %+v, want %d µ$ on test-model", got.Spend, spent)
	}
}

// The end user is read from the configured user_header, whatever its case
// in the config and on the wire, before the body's user field; the
// ledger entry names them.
func TestUserHeaderNamesTheEndUser(t *testing.T) {
	h := startWith(t, setup{teamLimits: monthlyTen, topExtra: "user_header: x-end-user\n"})
	rec := recordSettlements(h.app)
	for i, c := range []struct {
		header map[string]string
		body   string
		want   string
	}{
		{map[string]string{"x-END-user": "bob"}, `,"user":"carol"`, "bob"},
		{nil, `,"user":"carol"`, "carol"},
		{map[string]string{"X-Tollgate-User": "alice"}, "", ""}, // not the configured header
	} {
		resp, _ := h.post("/v1/chat/completions", testKey, `{"model":"test-model","messages":[{"role":"user","content":"hi"}]`+c.body+`}`, c.header)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if got := rec.wait(t, i+1)[i].User; got != c.want {
			t.Errorf("request %d (headers %v, body user %q): the ledger names user %q, want %q", i, c.header, c.body, got, c.want)
		}
	}
}

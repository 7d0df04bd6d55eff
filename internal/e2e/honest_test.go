package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// refusalInfo is the "tollgate" object of a refusal, in either error shape.
type refusalInfo struct {
	Message, Code, Type string
	Estimate, Remaining int64
	Amount              int64
	Held                *int64
	Fit                 *int64 `json:"max_output_tokens_that_fit"`
}

func refusalOf(t *testing.T, raw []byte) refusalInfo {
	t.Helper()
	var body struct {
		Error struct {
			Message, Code, Type string
			Tollgate            *refusalInfo
		}
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Error.Tollgate == nil {
		t.Fatalf("refusal without a tollgate object: %s", raw)
	}
	info := *body.Error.Tollgate
	info.Message, info.Code, info.Type = body.Error.Message, body.Error.Code, body.Error.Type
	return info
}

// recorder is an SDK transport that keeps every response's status, headers
// and body, and runs onRefusal after the first refusal.
type recorder struct {
	mu        sync.Mutex
	seen      []*http.Response
	bodies    [][]byte
	onRefusal func()
	once      sync.Once
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.seen, r.bodies = append(r.seen, resp), append(r.bodies, body)
	r.mu.Unlock()
	if resp.StatusCode >= 400 && r.onRefusal != nil {
		r.once.Do(r.onRefusal)
	}
	return resp, nil
}

func (r *recorder) calls() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.seen) }

// untilMonthEnd is how long until the month's budgets reset (UTC).
func untilMonthEnd() time.Duration {
	now := time.Now()
	return budget.PeriodEnd(budget.Month, now, time.UTC).Sub(now)
}

// checkFinal holds a final budget refusal's headers: no Retry-After
// (a client would sleep out the month: opencode does), X-Should-Retry
// false, and the reset in the limit headers.
func checkFinal(t *testing.T, h http.Header) {
	t.Helper()
	if h.Get("Retry-After") != "" || h.Get("Retry-After-Ms") != "" {
		t.Fatalf("Retry-After %q on a refusal no wait mends", h.Get("Retry-After"))
	}
	reset, err := strconv.Atoi(h.Get("X-RateLimit-Reset"))
	if want := untilMonthEnd().Seconds(); err != nil || math.Abs(float64(reset)-want) > 60 {
		t.Fatalf("X-RateLimit-Reset = %q, want about %.0f s (the month's end)", h.Get("X-RateLimit-Reset"), want)
	}
	if h.Get("X-Should-Retry") != "false" {
		t.Fatalf("X-Should-Retry = %q, want false", h.Get("X-Should-Retry"))
	}
}

// holder holds requests whose body carries "HOLD" at the simulated
// upstream until released.
type holder struct {
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// newHolder returns a holder that lets everything go when the test ends.
func newHolder(t *testing.T) *holder {
	hd := &holder{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	t.Cleanup(hd.free)
	return hd
}

func (hd *holder) free() { hd.once.Do(func() { close(hd.release) }) }

// hold runs send (a request whose body says HOLD) in the background and
// returns once it is held at the upstream; the channel gets its result
// when it is let go. A request refused before it got there fails the test.
func (hd *holder) hold(t *testing.T, send func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- send() }()
	select {
	case <-hd.arrived:
	case err := <-done:
		t.Fatalf("the request meant to hold the budget did not reach the upstream: %v", err)
	}
	return done
}

func (hd *holder) before(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte("HOLD")) {
		hd.arrived <- struct{}{}
		select {
		case <-hd.release:
		case <-r.Context().Done():
		}
	}
}

// The three budget refusals through the OpenAI SDK, each with its own code,
// message, headers and facts: too large for what remains (with the cap that
// fits, which then passes), held by a request in flight (the SDK retries and
// gets through once it settles), and exhausted (the SDK does not retry).
func TestHonestRefusalsThroughOpenAISDK(t *testing.T) {
	hd := newHolder(t)
	h := start(t, `{name: usd-month, kind: budget, unit: usd, amount: "1500 µ$", period: month}`, simulated.Options{Before: hd.before})
	rec := &recorder{}
	c := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(2),
		option.WithHTTPClient(&http.Client{Transport: rec}))
	ask := func(content string, cap int64) openai.ChatCompletionNewParams {
		p := chatParams("test-model", content)
		p.MaxCompletionTokens = openai.Int(cap)
		return p
	}

	// 1. Too large: nothing is spent, but 1000 output tokens (2000 µ$) is
	// more than the 1500 µ$ ceiling.
	_, err := c.Chat.Completions.New(ctx, ask("how much", 1000))
	e := apiError(t, err)
	info := refusalOf(t, rec.bodies[0])
	if e.StatusCode != 400 || info.Code != "request_exceeds_budget_remaining" || info.Type != "invalid_request_error" || rec.calls() != 1 {
		t.Fatalf("too large: %d %s %s after %d calls", e.StatusCode, info.Type, info.Code, rec.calls())
	}
	checkFinal(t, rec.seen[0].Header)
	input := info.Estimate - 2*1000
	if info.Remaining != 1500 || info.Amount != 1500 || input <= 0 || info.Fit == nil {
		t.Fatalf("too large: facts %+v", info)
	}
	fit := *info.Fit
	if input+2*fit > 1500 || input+2*(fit+1) <= 1500 {
		t.Fatalf("max_output_tokens_that_fit = %d for input %d µ$: not the largest that fits 1500 µ$", fit, input)
	}
	for _, want := range []string{"estimated at $0.00" + strconv.FormatInt(info.Estimate, 10), "max_completion_tokens to at most " + strconv.FormatInt(fit, 10)} {
		if !strings.Contains(info.Message, want) {
			t.Fatalf("message %q does not say %q", info.Message, want)
		}
	}
	if _, err := c.Chat.Completions.New(ctx, ask("how much", fit)); err != nil {
		t.Fatalf("the cap the refusal named does not fit: %v", err)
	}
	spent, _ := h.spent(teamMonth)

	// 2. Held: a request in flight holds 1200 µ$; a second one fits in what
	// is unspent but not in what is unheld.
	held := hd.hold(t, func() error {
		hc := h.client()
		_, err := hc.Chat.Completions.New(ctx, ask("HOLD", 600))
		return err
	})
	rec2 := &recorder{onRefusal: hd.free}
	c2 := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(2),
		option.WithHTTPClient(&http.Client{Transport: rec2}))
	if _, err := c2.Chat.Completions.New(ctx, ask("next", 200)); err != nil {
		t.Fatalf("held: the SDK's retry did not get through once the hold settled: %v", err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	first := rec2.seen[0]
	info = refusalOf(t, rec2.bodies[0])
	if first.StatusCode != 429 || info.Code != "budget_held_by_requests_in_flight" || info.Held == nil || *info.Held < 1200 || rec2.calls() < 2 { // a retry that came before the hold settled is refused and retried again
		t.Fatalf("held: %d %+v after %d calls", first.StatusCode, info, rec2.calls())
	}
	if ra, err := strconv.Atoi(first.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 || first.Header.Get("X-Should-Retry") != "true" {
		t.Fatalf("held: Retry-After %q, X-Should-Retry %q; want seconds and true", first.Header.Get("Retry-After"), first.Header.Get("X-Should-Retry"))
	}
	if info.Remaining != 1500-spent-*info.Held || !strings.Contains(info.Message, "in flight") {
		t.Fatalf("held: remaining %d with %d spent and %d held; message %q", info.Remaining, spent, *info.Held, info.Message)
	}

	// 3. Exhausted: finance freezes the budget at what is spent.
	spent, _ = h.spent(teamMonth)
	freeze(t, h.app, spent)
	rec3 := &recorder{}
	c3 := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(2),
		option.WithHTTPClient(&http.Client{Transport: rec3}))
	_, err = c3.Chat.Completions.New(ctx, ask("more", 10))
	e = apiError(t, err)
	info = refusalOf(t, rec3.bodies[0])
	if e.StatusCode != 400 || info.Code != "insufficient_quota" || info.Type != "insufficient_quota" || rec3.calls() != 1 || !strings.Contains(info.Message, "exhausted") {
		t.Fatalf("exhausted: %d %+v after %d calls", e.StatusCode, info, rec3.calls())
	}
	checkFinal(t, rec3.seen[0].Header)
	// Each case has its own reason in the metrics.
	fams := h.scrape()
	for _, reason := range []string{"budget_too_small_for_request", "budget_held", "budget_exhausted"} {
		if v := value(t, fams, "tollgate_refusals_total", map[string]string{"reason": reason, "limit": "usd-month"}); v < 1 {
			t.Errorf("tollgate_refusals_total{reason=%q} = %v", reason, v)
		}
	}
}

// freeze sets the ml team's month budget to amount µ$ at run time.
func freeze(t *testing.T, a *app.App, amount int64) {
	t.Helper()
	l := budget.Limit{Bucket: teamMonth, Partition: "acme", Name: "usd-month", Scope: budget.ScopeTeam, Kind: budget.Ceiling,
		Unit: budget.Microdollars, Amount: amount, Period: budget.Month}
	if err := a.Engine().SetCeiling(context.Background(), l, amount, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// The same three refusals in Anthropic's error shape, through its SDK.
func TestHonestRefusalsThroughAnthropicSDK(t *testing.T) {
	hd := newHolder(t)
	url, a, _, _, _ := anthropicGateway(t, 20_000, simulated.Options{Before: hd.before})
	rec := &recorder{}
	c := anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(2),
		aoption.WithHTTPClient(&http.Client{Transport: rec}))
	ask := func(text string, maxTokens int64) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: claude, MaxTokens: maxTokens,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
	}
	var apierr *anthropic.Error

	// Too large: 2000 output tokens at $15/1M is 30,000 µ$.
	_, err := c.Messages.New(ctx, ask("how much", 2000))
	info := refusalOf(t, rec.bodies[0])
	if !errors.As(err, &apierr) || apierr.StatusCode != 400 || info.Code != "request_exceeds_budget_remaining" || info.Fit == nil || rec.calls() != 1 {
		t.Fatalf("too large: %v %+v after %d calls", err, info, rec.calls())
	}
	checkFinal(t, rec.seen[0].Header)
	if !strings.Contains(info.Message, "max_tokens to at most "+strconv.FormatInt(*info.Fit, 10)) {
		t.Fatalf("message %q", info.Message)
	}
	if _, err := c.Messages.New(ctx, ask("how much", *info.Fit)); err != nil {
		t.Fatalf("the cap the refusal named does not fit: %v", err)
	}

	// Held. (The client has its answer before the gateway settles: wait
	// for the last request's settlement, or its reservation holds too.)
	spentNow(t, a)
	held := hd.hold(t, func() error {
		ac := anthropicClient(url, 0)
		_, err := ac.Messages.New(ctx, ask("HOLD", 1100))
		return err
	})
	rec2 := &recorder{onRefusal: hd.free}
	c2 := anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(2),
		aoption.WithHTTPClient(&http.Client{Transport: rec2}))
	if _, err := c2.Messages.New(ctx, ask("next", 300)); err != nil {
		t.Fatalf("held: the SDK's retry did not get through: %v", err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	info = refusalOf(t, rec2.bodies[0])
	if rec2.seen[0].StatusCode != 429 || info.Code != "budget_held_by_requests_in_flight" || info.Held == nil || rec2.seen[0].Header.Get("X-Should-Retry") != "true" || rec2.calls() < 2 {
		t.Fatalf("held: %+v, X-Should-Retry %q, %d calls", info, rec2.seen[0].Header.Get("X-Should-Retry"), rec2.calls())
	}

	// Exhausted.
	spent, _ := spentNow(t, a)
	freeze(t, a, spent)
	rec3 := &recorder{}
	c3 := anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(2),
		aoption.WithHTTPClient(&http.Client{Transport: rec3}))
	_, err = c3.Messages.New(ctx, ask("more", 10))
	info = refusalOf(t, rec3.bodies[0])
	if !errors.As(err, &apierr) || info.Code != "insufficient_quota" || rec3.calls() != 1 || !strings.Contains(info.Message, "exhausted") {
		t.Fatalf("exhausted: %v %+v after %d calls", err, info, rec3.calls())
	}
	checkFinal(t, rec3.seen[0].Header)
}

// A budget with over_budget: clamp forwards a request too large for it
// with the largest output cap that fits, and says so.
func TestClampWritesTheCapThatFits(t *testing.T) {
	h := start(t, `{name: usd-month, kind: budget, unit: usd, amount: "1500 µ$", period: month, over_budget: clamp, clamp_min_output_tokens: 100}`,
		simulated.Options{ReplyTokens: func(uint64) int64 { return 5000 }}) // always up to the cap
	resp, eb := h.post("/v1/chat/completions", testKey, `{"model":"test-model","max_tokens":1000,"messages":[{"role":"user","content":"clamp me"}]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("clamped request: %d %+v", resp.StatusCode, eb)
	}
	got := resp.Header.Get("X-Tollgate-Output-Clamped")
	var forwarded struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(<-h.upBodies, &forwarded)
	if !strings.HasPrefix(got, "max_tokens="+strconv.FormatInt(forwarded.MaxTokens, 10)+"; requested=1000") || forwarded.MaxTokens >= 1000 || forwarded.MaxTokens < 100 {
		t.Fatalf("header %q, forwarded max_tokens %d", got, forwarded.MaxTokens)
	}
	spent, _ := h.spent(teamMonth)
	if spent > 1500 || spent != h.reportedCost("test-model") || spent < 1500-2 {
		t.Fatalf("spent %d of 1500 (the upstream reported %d): the clamp should use the budget up to the cap", spent, h.reportedCost("test-model"))
	}
	// Below the minimum, it is refused as too large.
	resp, eb = h.post("/v1/chat/completions", testKey, `{"model":"test-model","max_tokens":1000,"messages":[{"role":"user","content":"again"}]}`, nil)
	if resp.StatusCode != 400 || eb.Error.Code != "request_exceeds_budget_remaining" && eb.Error.Code != "insufficient_quota" {
		t.Fatalf("under the minimum: %d %+v", resp.StatusCode, eb)
	}
}

// The holes of the bound, through the gateway: a field in another case is
// refused naming it (nothing reaches the upstream or a budget); an image
// for a model of no known family is refused, not free; forty prompts
// reserve forty prompts' output.
func TestBoundHolesAreClosed(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ desc, path, body, field string }{
		{"N", "/v1/chat/completions", `{"model":"test-model","N":128,` + msgs + `}`, "N"},
		{"Stream", "/v1/chat/completions", `{"model":"test-model","Stream":true,` + msgs + `}`, "Stream"},
		{"long s", "/v1/chat/completions", `{"model":"test-model","\u017ftream":true,` + msgs + `}`, "ſtream"},
		{"nested", "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"hi","CONTENT":"long"}]}`, "messages[0].CONTENT"},
		{"best_of", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"x","BEST_OF":20}`, "BEST_OF"},
		{"image without a bound", "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`, "messages[0].content[0]"},
		{"priority tier", "/v1/chat/completions", `{"model":"test-model","service_tier":"priority",` + msgs + `}`, "service_tier"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, eb := h.post(tc.path, testKey, tc.body, nil)
			if resp.StatusCode != 400 || eb.Error.Code != "invalid_request" || eb.Error.Param == nil || *eb.Error.Param != tc.field || !strings.Contains(eb.Error.Message, tc.field) {
				t.Fatalf("%d %+v, want 400 naming %s", resp.StatusCode, eb.Error, tc.field)
			}
		})
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("%d refused bodies reached the upstream", h.upCalls.Load())
	}
	if spent, pending := h.spent(teamMonth); spent != 0 || pending != 0 {
		t.Fatalf("refused bodies left spent %d pending %d", spent, pending)
	}
	// Forty prompts with max_tokens 100: the reservation covers 4,000
	// output tokens (8,000 µ$ at $2/1M), and the upstream bills within it.
	entries := make(chan Entry, 1)
	h.app.Gateway().OnSettle(func(e Entry) { entries <- e })
	prompts := `"x"` + strings.Repeat(`,"x"`, 39)
	if resp, eb := h.post("/v1/completions", testKey, `{"model":"gpt-3.5-turbo-instruct","max_tokens":100,"prompt":[`+prompts+`]}`, nil); resp.StatusCode != 200 {
		t.Fatalf("forty prompts: %d %+v", resp.StatusCode, eb)
	}
	e := <-entries // the ledger hears of the settlement after the client has its answer
	u := h.sim.Stats().Usage["gpt-3.5-turbo-instruct"]
	if e.ReservedTokens < 40*100 || u.BilledCompletionTokens > 40*100 || u.BilledCompletionTokens <= 100 {
		t.Fatalf("entry %+v, billed %d output tokens: want a reservation of 40 × 100", e, u.BilledCompletionTokens)
	}
}

// Entry is a ledger entry.
type Entry = budget.Entry

// A threshold fires at the settlement whose spend crossed it, not only at a
// later request: one request that spends 60 % of a budget sends the 50 %
// alert by itself.
func TestAlertFiresAtTheSettlementThatCrossed(t *testing.T) {
	got := make(chan Alert, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		got <- a
	}))
	defer hook.Close()
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "1000 µ$", period: month}`,
		sim:        simulated.Options{ReplyTokens: func(uint64) int64 { return 300 }}, // 600 µ$ of output
		topExtra:   "alerts: {webhooks: [\"" + hook.URL + "\"]}\n",
	})
	if resp, eb := h.post("/v1/chat/completions", testKey, `{"model":"test-model","max_tokens":400,"messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != 200 {
		t.Fatalf("%d %+v", resp.StatusCode, eb)
	}
	select {
	case a := <-got:
		if a.Threshold != 50 || a.Basis != "settled" || a.Scope != "team" || a.Used < 600 {
			t.Fatalf("alert %+v, want 50 %% of settled spend", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no alert after the settlement that crossed 50 %")
	}
}

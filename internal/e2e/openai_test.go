package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const monthlyTen = `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`

var ctx = context.Background()

func chatParams(model, prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(prompt)},
	}
}

func TestChatThroughSDK(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	var resp *http.Response
	c := h.client()
	got, err := c.Chat.Completions.New(ctx, chatParams("test-model", "Hello there"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content == "" || got.Usage.PromptTokens == 0 {
		t.Fatalf("empty answer: %+v", got)
	}
	want := got.Usage.PromptTokens + 2*got.Usage.CompletionTokens
	if spent, pending := h.spent(teamMonth); spent != want || pending != 0 {
		t.Fatalf("spent %d pending %d, want %d µ$ settled from the reported usage", spent, pending, want)
	}
	// The IETF pair holds every limit; the X- duplicates are for
	// refusals, and for allowed responses where limit_headers is all.
	for _, k := range []string{"RateLimit", "RateLimit-Policy", "X-Tollgate-Request-Id", "X-Tollgate-Upstream"} {
		if resp.Header.Get(k) == "" {
			t.Errorf("allowed response lacks %s: %v", k, resp.Header)
		}
	}
	for _, k := range []string{"X-RateLimit-Remaining", "X-Tollgate-Budget-Remaining-Usd"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("allowed response carries %s: %q, by default", k, v)
		}
	}
	upstreamHeaders(t, resp.Header, openaiPassed, openaiKept)
	// The default output cap was written into the forwarded request.
	body := string(<-h.upBodies)
	if !strings.Contains(body, `"max_completion_tokens":100`) {
		t.Errorf("forwarded body lacks the default cap: %s", body)
	}
}

// With server.limit_headers: all, an allowed response carries the X-
// duplicates too: the deciding limit's and the tightest dollar budget's,
// in units a client reads without parsing a structured field.
func TestAllLimitHeadersOnAllowedResponses(t *testing.T) {
	h := startWith(t, setup{teamLimits: monthlyTen, topExtra: "server:\n  limit_headers: all\n"})
	var resp *http.Response
	c := h.client()
	if _, err := c.Chat.Completions.New(ctx, chatParams("test-model", "Hello there"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"X-RateLimit-Policy": "team-usd-month", "X-RateLimit-Limit": "10000000",
		"X-Tollgate-Budget-Policy": "team-usd-month", "X-Tollgate-Budget-Limit-Usd": "10.000000"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if r, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64); err != nil || r <= 0 || r >= 10_000_000 {
		t.Errorf("X-RateLimit-Remaining = %q, want what is left of $10 after a request", resp.Header.Get("X-RateLimit-Remaining"))
	}
}

func TestChatStreamingThroughSDK(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		wantUsage bool
	}{
		{"client did not ask for usage: the usage chunk is stripped", false},
		{"client asked for usage: it gets the chunk", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := start(t, monthlyTen, simulated.Options{})
			p := chatParams("test-model", "Stream me something")
			if tc.wantUsage {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
			}
			c := h.client()
			var resp *http.Response
			stream := c.Chat.Completions.NewStreaming(ctx, p, option.WithResponseInto(&resp))
			var text strings.Builder
			chunks, usageChunks := 0, 0
			for stream.Next() {
				c := stream.Current()
				chunks++
				if c.Usage.PromptTokens > 0 {
					usageChunks++
				}
				for _, ch := range c.Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if chunks < 3 || text.Len() == 0 {
				t.Fatalf("stream too short: %d chunks, %q", chunks, text.String())
			}
			upstreamHeaders(t, resp.Header, openaiPassed, openaiKept)
			if want := map[bool]int{false: 0, true: 1}[tc.wantUsage]; usageChunks != want {
				t.Fatalf("usage chunks = %d, want %d", usageChunks, want)
			}
			if spent, pending := h.spent(teamMonth); spent != h.reportedCost("test-model") || pending != 0 || spent == 0 {
				t.Fatalf("spent %d pending %d, want the reported %d", spent, pending, h.reportedCost("test-model"))
			}
		})
	}
}

func TestCompletionsAndEmbeddingsThroughSDK(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	c := h.client()
	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:  "gpt-3.5-turbo-instruct",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: param.NewOpt("Say this is a test")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text == "" || comp.Usage.CompletionTokens > 16 {
		t.Fatalf("completion %+v: want text within the API's default 16 tokens", comp)
	}
	emb, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second, longer text 你好"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || len(emb.Data[0].Embedding) == 0 || emb.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings %+v", emb.Usage)
	}
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:     "gpt-3.5-turbo-instruct",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: param.NewOpt("Stream a test")},
		MaxTokens: param.NewOpt[int64](5),
	})
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err != nil || n == 0 {
		t.Fatalf("completions stream: %d chunks, err %v", n, err)
	}
	u := h.sim.Stats().Usage
	// µ$: instruct at $1.50/$2 per 1M, embeddings at $0.02 per 1M (each rounded up per request).
	if spent, pending := h.spent(teamMonth); spent == 0 || pending != 0 {
		t.Fatalf("spent %d pending %d after %+v", spent, pending, u)
	}
}

// apiError runs f and returns the SDK's typed error.
func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var apierr *openai.Error
	if !errors.As(err, &apierr) {
		t.Fatalf("err = %v, want *openai.Error", err)
	}
	return apierr
}

func TestBudgetExhaustedThroughSDK(t *testing.T) {
	// Each request reserves (prompt + 2×100 output) µ$; the ceiling affords
	// one and not two.
	h := start(t, `{name: usd-month, kind: budget, unit: usd, amount: "300 µ$", period: month}`, simulated.Options{
		ReplyTokens: func(uint64) int64 { return 1000 }, // always up to the cap: no refund
	})
	c := openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey(testKey)) // default retries
	if _, err := c.Chat.Completions.New(ctx, chatParams("test-model", "one")); err != nil {
		t.Fatal(err)
	}
	before := h.gwCalls.Load()
	_, err := c.Chat.Completions.New(ctx, chatParams("test-model", "two"))
	e := apiError(t, err)
	// The first request spent all but a sliver: the second is too large
	// for what remains.
	if e.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Code != "request_exceeds_budget_remaining" {
		t.Fatalf("refusal = %d %s %s", e.StatusCode, e.Type, e.Code)
	}
	hdr := e.Response.Header
	if ra := hdr.Get("Retry-After"); ra != "" {
		t.Fatalf("Retry-After = %q on a refusal no wait mends", ra)
	}
	if hdr.Get("X-Should-Retry") != "false" {
		t.Fatalf("x-should-retry = %q", hdr.Get("X-Should-Retry"))
	}
	if n := h.gwCalls.Load() - before; n != 1 {
		t.Fatalf("the SDK sent %d requests; x-should-retry:false must stop its retries", n)
	}
	if !strings.Contains(e.RawJSON(), `"limit":"usd-month"`) {
		t.Fatalf("body does not name the limit: %s", e.RawJSON())
	}
	if h.upCalls.Load() != 1 {
		t.Fatalf("upstream saw %d requests, want 1", h.upCalls.Load())
	}
}

func TestRateLimitedThroughSDK(t *testing.T) {
	h := start(t, `{name: rpm, kind: rate, unit: requests, amount: 1, window: 1m}`, simulated.Options{})
	c := h.client()
	if _, err := c.Chat.Completions.New(ctx, chatParams("test-model", "one")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Chat.Completions.New(ctx, chatParams("test-model", "two"))
	e := apiError(t, err)
	hdr := e.Response.Header
	if e.StatusCode != 429 || e.Code != "rate_limit_exceeded" {
		t.Fatalf("refusal = %d %s", e.StatusCode, e.Code)
	}
	ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
	if ra < 59 || ra > 60 {
		t.Fatalf("Retry-After = %q, want about 60", hdr.Get("Retry-After"))
	}
	if hdr.Get("X-RateLimit-Limit") != "1" || hdr.Get("X-RateLimit-Remaining") != "0" ||
		!strings.Contains(hdr.Get("RateLimit-Policy"), `"team-rpm";q=1;qu="requests";w=60`) ||
		!strings.Contains(hdr.Get("RateLimit"), `"team-rpm";r=0;`) {
		t.Fatalf("rate headers: %v", hdr)
	}
	if hdr.Get("X-Should-Retry") == "false" {
		t.Fatal("a rate refusal must stay retryable")
	}
}

func TestResponsesThroughSDK(t *testing.T) {
	h := start(t, monthlyTen, simulated.Options{})
	c := h.client()
	params := responses.ResponseNewParams{
		Model:           "test-model",
		Instructions:    param.NewOpt("You are terse."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Say hello in three languages.")},
		MaxOutputTokens: param.NewOpt[int64](200),
	}
	resp, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() == "" || resp.Usage.InputTokens == 0 {
		t.Fatalf("response %+v", resp)
	}
	stream := c.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var completed bool
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = ev.Response.Usage.OutputTokens > 0
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.Len() == 0 || !completed {
		t.Fatalf("stream: %q, completed with usage %v", text.String(), completed)
	}
	if spent, pending := h.spent(teamMonth); spent != h.reportedCost("test-model") || pending != 0 || spent == 0 {
		t.Fatalf("spent %d pending %d, want the reported %d", spent, pending, h.reportedCost("test-model"))
	}
	// A stored conversation cannot be bounded: refused before anything is spent.
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("more")}, PreviousResponseID: param.NewOpt(resp.ID)})
	if e := apiError(t, err); e.StatusCode != 400 || e.Param != "previous_response_id" {
		t.Fatalf("previous_response_id: %d %s", e.StatusCode, e.Param)
	}
}

// The headers the simulated upstream puts on every answer, as the provider
// does: the request ids are passed on, for support tickets; the account's
// organisation and rate limits describe the gateway's account, not the
// client's, and stay at the gateway.
var (
	openaiPassed    = []string{"X-Request-Id", "Openai-Version", "Openai-Processing-Ms"}
	openaiKept      = []string{"Openai-Organization", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Requests"}
	anthropicPassed = []string{"Request-Id"}
	anthropicKept   = []string{"Anthropic-Organization-Id", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Reset"}
)

// upstreamHeaders checks that an answer relayed from the simulated
// upstream carries the headers passed and none of those kept.
func upstreamHeaders(t *testing.T, h http.Header, passed, kept []string) {
	t.Helper()
	for _, k := range passed {
		if h.Get(k) == "" {
			t.Errorf("the upstream's %s did not reach the client", k)
		}
	}
	for _, k := range kept {
		if v := h.Get(k); v != "" {
			t.Errorf("the upstream's %s reached the client: %q", k, v)
		}
	}
}

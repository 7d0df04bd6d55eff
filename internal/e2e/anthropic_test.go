package e2e_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const claude = "claude-sonnet-4-5"

// anthropicGateway runs a gateway in front of a simulated Anthropic
// upstream; the team's month budget is ceiling µ$. Claude is priced at
// $3/$15 per 1M tokens, so costs are exact integers.
func anthropicGateway(t *testing.T, ceiling int64, opts simulated.Options) (url string, a *app.App, sim *simulated.Server, calls *atomic.Int64, entries func() []budget.Entry) {
	t.Helper()
	opts.APIKey = "anthropic-upstream-key"
	sim, err := simulated.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + up.URL + `/v1", api_key: anthropic-upstream-key, models: [` + claude + `]}
models:
  ` + claude + `: {encoding: o200k_base, input: "$3", cached_input: "$0.30", cache_write: "$3.75", output: "$15", max_output_tokens: 64000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + strconv.FormatInt(ceiling, 10) + ` µ$", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	a = apptest.New(t, src, nil)
	calls = new(atomic.Int64)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		a.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { gw.Close(); a.Close() })
	var mu sync.Mutex
	var list []budget.Entry
	a.Gateway().OnSettle(func(e budget.Entry) { mu.Lock(); list = append(list, e); mu.Unlock() })
	return gw.URL, a, sim, calls, func() []budget.Entry { mu.Lock(); defer mu.Unlock(); return append([]budget.Entry(nil), list...) }
}

func anthropicClient(url string, retries int) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(retries))
}

func TestAnthropicMessagesThroughSDK(t *testing.T) {
	url, a, sim, _, entries := anthropicGateway(t, 10_000_000, simulated.Options{})
	c := anthropicClient(url, 0)
	params := anthropic.MessageNewParams{
		Model:     claude,
		MaxTokens: 300,
		System:    []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello, Claude. 你好 🙂"))},
	}
	var resp *http.Response
	msg, err := c.Messages.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.InputTokens == 0 {
		t.Fatalf("answer %+v", msg)
	}
	upstreamHeaders(t, resp.Header, anthropicPassed, anthropicKept)

	stream := c.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) == 0 || acc.Usage.OutputTokens == 0 {
		t.Fatalf("streamed answer %+v", acc)
	}
	upstreamHeaders(t, resp.Header, anthropicPassed, anthropicKept)

	u := sim.Stats().Usage[claude]
	spent, pending := spentNow(t, a)
	if want := 3*u.PromptTokens + 15*u.CompletionTokens; spent != want || pending != 0 || u.Requests != 2 {
		t.Fatalf("spent %d pending %d; the upstream reported %d requests worth %d µ$", spent, pending, u.Requests, want)
	}
	for _, e := range entries() {
		if e.Usage.Estimated || e.Cost > e.Reserved {
			t.Fatalf("entry %+v: the estimate must bound the reported usage (simulated Claude counts %.1f× BPE)", e, simulated.ClaudeFactor)
		}
	}
}

func TestAnthropicRefusalsAreAnthropicErrors(t *testing.T) {
	url, _, _, calls, _ := anthropicGateway(t, 100, simulated.Options{}) // 100 µ$: nothing fits
	c := anthropicClient(url, 2)
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: claude, MaxTokens: 1000,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var apierr *anthropic.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != 400 {
		t.Fatalf("err = %v, want a 400 *anthropic.Error", err)
	}
	raw := apierr.RawJSON()
	if !strings.Contains(raw, `"type":"invalid_request_error"`) || !strings.Contains(raw, `"code":"request_exceeds_budget_remaining"`) {
		t.Fatalf("body %s", raw)
	}
	if apierr.Response.Header.Get("Retry-After") != "" || calls.Load() != 1 {
		t.Fatalf("Retry-After %q, %d calls (a final refusal: no wait, no retry)", apierr.Response.Header.Get("Retry-After"), calls.Load())
	}
	// A request without max_tokens is refused in Anthropic's shape too.
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"`+claude+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Api-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Type  string
		Error struct{ Type, Message string }
	}
	_ = jsonDecode(resp, &body)
	if resp.StatusCode != 400 || body.Type != "error" || body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, "required") {
		t.Fatalf("no max_tokens: %d %+v", resp.StatusCode, body)
	}
}

// The fault modes on Anthropic streams: one ledger entry each, estimated
// where the gateway counted, the bound enforced mid-stream, charged once.
func TestAnthropicStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		fault     simulated.Fault
		reply     int64
		estimated bool
	}{
		{"truncated", simulated.Truncate, 16, true},
		{"usage dropped", simulated.DropUsage, 16, true},
		{"usage twice", simulated.DoubleUsage, 16, false},
		{"max_tokens ignored", simulated.IgnoreMaxTokens, 400, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			url, a, sim, _, entries := anthropicGateway(t, 10_000_000, simulated.Options{Fault: tc.fault, ReplyTokens: func(uint64) int64 { return tc.reply }})
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages",
				strings.NewReader(`{"model":"`+claude+`","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"a long story"}]}`))
			req.Header.Set("X-Api-Key", testKey)
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			spent, pending := spentNow(t, a)
			es := entries()
			if len(es) != 1 {
				t.Fatalf("%d entries", len(es))
			}
			e, st := es[0], sim.Stats().Usage[claude]
			if e.Usage.Estimated != tc.estimated || spent != int64(e.Cost) || pending != 0 {
				t.Fatalf("entry %+v; spent %d pending %d", e, spent, pending)
			}
			switch tc.fault {
			case simulated.DoubleUsage:
				if e.Usage.OutputTokens != st.CompletionTokens || e.Usage.InputTokens != st.PromptTokens {
					t.Fatalf("usage %+v, reported once %+v", e.Usage, st)
				}
			case simulated.IgnoreMaxTokens:
				if e.Cost != e.Reserved || !strings.Contains(string(got), "output_limit_reached") {
					t.Fatalf("overrun: cost %v reserved %v, stream ends %q", e.Cost, e.Reserved, tail(got))
				}
			default: // no usage at the stream's end: the reservation
				if e.Cost != e.Reserved || e.Usage.OutputTokens != 20 || e.Settlement != "reservation" {
					t.Fatalf("charged %v of %v (%d output tokens, %d relayed); want the reservation", e.Cost, e.Reserved, e.Usage.OutputTokens, st.DeliveredTokens)
				}
			}
		})
	}
}

package e2e_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// An alias whose primary, an OpenAI deployment, fails before answering —
// a 5xx, a 429, a 404 (misconfigured), a connection reset — is answered by its second, Claude on
// an Anthropic upstream: the OpenAI client sees one answer, in its own
// format; the ledger one entry, at Claude's price — and, for the reset
// (the primary had the request, and may bill it), the primary's attempt
// at its reservation.
func TestFailoverToAnotherProvider(t *testing.T) {
	for _, tc := range []struct {
		desc string
		fail http.HandlerFunc
		sent bool // the primary had the request, and may bill it
	}{
		{"a 500", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`))
		}, false},
		{"a 429", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","code":"rate_limit_exceeded"}}`))
		}, false},
		{"a 404 (a base_url without its /v1)", http.NotFound, false},
		{"a reset connection", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			_ = conn.(*net.TCPConn).SetLinger(0) // close with RST
			_ = conn.Close()
		}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var primary atomic.Int64
			broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				primary.Add(1)
				tc.fail(w, r)
			}))
			defer broken.Close()
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "upstream-key"})
			url, a := apptest.Serve(t, `
upstreams:
  - {name: openai, base_url: "`+broken.URL+`/v1", api_key: upstream-key, models: [gpt-4o-mini]}
  - {name: anthropic, kind: anthropic, base_url: "`+upURL+`/v1", api_key: upstream-key, models: [`+claude+`]}
models:
  gpt-4o-mini: {input: "$1", output: "$2"}
  `+claude+`: {input: "$3", output: "$15"}
aliases:
  smart:
    strategy: ordered
    deployments: [{upstream: openai, model: gpt-4o-mini}, {upstream: anthropic, model: `+claude+`}]
`+acmeML, nil)
			settled := recordSettlements(a)

			c := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
			var raw *http.Response
			resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "smart", MaxTokens: openai.Int(100),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content == "" || raw.Header.Get("X-Tollgate-Deployment") != "anthropic/"+claude || primary.Load() != 1 {
				t.Fatalf("answer %q from %q; the primary was asked %d times", resp.Choices[0].Message.Content, raw.Header.Get("X-Tollgate-Deployment"), primary.Load())
			}
			u := sim.Stats().Usage[claude]
			want := 3*u.PromptTokens + 15*u.CompletionTokens
			spent, pending := spentNow(t, a)
			if tc.sent {
				// Reset after the primary had the request: it may bill it,
				// so that attempt is charged its reservation too.
				entries := settled.wait(t, 2)
				first, served := entries[0], entries[1]
				if first.Abandoned != "connection" || first.Cost != first.Reserved || int64(served.Cost) != want || spent != want+int64(first.Cost) || pending != 0 {
					t.Fatalf("spent %d pending %d, entries %+v: want the primary's reservation and Claude's %d µ$", spent, pending, entries, want)
				}
				return
			}
			entries := settled.wait(t, 1)
			if spent != want || pending != 0 || len(entries) != 1 || int64(entries[0].Cost) != want || entries[0].ServedModel != claude || entries[0].Model != "smart" {
				t.Fatalf("spent %d pending %d, entries %+v: want one, at Claude's price (%d µ$)", spent, pending, entries, want)
			}
		})
	}
}

// An upstream that answers 404 — its base_url lacks the version segment,
// or it does not serve the model — is the gateway's misconfiguration,
// not the client's: the client gets a 502 in its own format naming the
// upstream and the address asked (never its query, which may hold a
// key), nothing is charged, and the upstream's breaker stays closed.
func TestAnUpstream404IsAGatewayError(t *testing.T) {
	sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "upstream-key"})
	url, a := apptest.Serve(t, `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "`+upURL+`", api_key: upstream-key, models: [`+claude+`]}
models:
  `+claude+`: {input: "$3", output: "$15"}
`+acmeML, nil)
	for i := range 6 { // more than a breaker's failures, were 404 one
		status, body := callAs(t, testKey, http.MethodPost, url+"/v1/messages", `{"model":"`+claude+`","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
		if status != http.StatusBadGateway || !strings.Contains(body, "upstream anthropic answered 404") ||
			!strings.Contains(body, upURL+"/messages") || !strings.Contains(body, `"type":"error"`) {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	// Every request reached the upstream: no breaker opened on them.
	if spent, pending := spentNow(t, a); spent != 0 || pending != 0 || sim.Stats().Requests != 6 {
		t.Fatalf("spent %d, pending %d; the upstream was asked %d times, want 6", spent, pending, sim.Stats().Requests)
	}
}

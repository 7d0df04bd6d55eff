package simulated

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// A reply of n words must be exactly n tokens, or the usage the simulated
// upstream reports would not be honest.
func TestReplyWordsAreOneTokenEach(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		c, err := tokenizer.Load(enc)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(20) {
			for _, n := range []int64{1, 7, 50, 333} {
				if got := c.Count(reply(seed, n)); got != n {
					t.Fatalf("%s: reply(%d, %d) is %d tokens", enc, seed, n, got)
				}
			}
		}
	}
}

// TestChunksAsOpenAIWritesThem: a streamed chat answer's chunks carry
// OpenAI's fields in OpenAI's order, "usage": null on each chunk of a
// stream that asked for usage, and an obfuscation string on each delta
// chunk unless it was turned off — what a gateway meets on the wire.
func TestChunksAsOpenAIWritesThem(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obfuscate := range []bool{true, false} {
		body := fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":5,"stream_options":{"include_usage":true,"include_obfuscation":%v},"messages":[{"role":"user","content":"hi"}]}`, obfuscate)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		var chunks []string
		for line := range strings.SplitSeq(rec.Body.String(), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				chunks = append(chunks, d)
			}
		}
		if len(chunks) < 3 {
			t.Fatalf("%d chunks: %s", len(chunks), rec.Body)
		}
		for i, c := range chunks {
			if !strings.HasPrefix(c, `{"id":"chatcmpl-`) || !strings.Contains(c, `,"object":"chat.completion.chunk","created":`) {
				t.Errorf("chunk %d does not start as OpenAI's: %s", i, c)
			}
			last := i == len(chunks)-1
			if !last && !strings.Contains(c, `"usage":null`) || last && !strings.Contains(c, `"choices":[],"usage":{"prompt_tokens":`) {
				t.Errorf("chunk %d of %d: usage: %s", i, len(chunks), c)
			}
			if got := strings.Contains(c, `"obfuscation":"`); got != (obfuscate && !last) {
				t.Errorf("include_obfuscation %v, chunk %d: %s", obfuscate, i, c)
			}
		}
	}
}

// Every answer carries its own provider's headers, whatever it holds, and
// none of another provider's.
func TestAnswersCarryTheirProvidersHeaders(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	openai := []string{"X-Request-Id", "Openai-Organization", "Openai-Version", "X-Ratelimit-Remaining-Tokens"}
	anthropic := []string{"Request-Id", "Anthropic-Organization-Id", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Output-Tokens-Reset"}
	for _, tc := range []struct {
		path, body    string
		want, notWant []string
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, openai, anthropic},
		{"/v1/chat/completions", `{"model":"m"}`, openai, anthropic}, // refused: the headers all the same
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, anthropic, openai},
		{"/v1/projects/p/locations/l/publishers/google/models/g:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, nil, append(openai, anthropic...)},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
		for _, k := range tc.want {
			if rec.Header().Get(k) == "" {
				t.Errorf("%s %s (%d): no %s", tc.path, tc.body, rec.Code, k)
			}
		}
		for _, k := range tc.notWant {
			if v := rec.Header().Get(k); v != "" {
				t.Errorf("%s (%d): %s = %q", tc.path, rec.Code, k, v)
			}
		}
	}
	// Without them (NoProviderHeaders), an answer carries none.
	bare, err := New(Options{NoProviderHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		rec := httptest.NewRecorder()
		bare.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)))
		for _, k := range append(openai, anthropic...) {
			if v := rec.Header().Get(k); v != "" {
				t.Errorf("%s without provider headers (%d): %s = %q", path, rec.Code, k, v)
			}
		}
	}
}

// A streamed text delta goes out with its fields in Anthropic's order, as
// the API writes it, not a map's sorted one.
func TestAnthropicTextDeltaInTheAPIsOrder(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	s.ServeHTTP(rec, req)
	const want = `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`
	if !strings.Contains(rec.Body.String(), "event: content_block_delta\n"+want) {
		t.Fatalf("no text delta written as %s in %d: %s", want, rec.Code, rec.Body.String())
	}
}

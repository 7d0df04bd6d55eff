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

package bound_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// BenchmarkParsePrepareSmall is the gateway benchmark's request
// (bench/gateway-callgrind.sh): a system prompt and a question, a cap.
func BenchmarkParsePrepareSmall(b *testing.B) {
	m := model(b, "o200k_base")
	m.Name = "gpt-4o-mini" // as the gateway's model is named: nothing to rename
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		parsePrepare(b, m, bound.Chat, body)
	}
}

// BenchmarkParsePrepare is the gateway's whole work on a body before the
// reservation: read, check, bound, rewrite. The conversation is 20
// messages of prose with a tool, counted from the cache after the first
// round (as agents resend their history), so the JSON work shows.
func BenchmarkParsePrepare(b *testing.B) {
	m := model(b, "o200k_base")
	var msgs []string
	for i := range 20 {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, `{"role":"`+role+`","content":"`+strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)+`"}`)
	}
	body := []byte(`{"model":"m","max_tokens":256,"stream":true,"messages":[` + strings.Join(msgs, ",") +
		`],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		parsePrepare(b, m, bound.Chat, body)
	}
}

// BenchmarkParsePrepareLong is a 200-message conversation (186 KB) sent as
// an OpenAI chat and as an Anthropic Messages request.
func BenchmarkParsePrepareLong(b *testing.B) {
	m := model(b, "o200k_base")
	msgs := make([]string, 200)
	for i := range msgs {
		msgs[i] = `{"role":"` + []string{"user", "assistant"}[i%2] + `","content":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) + `"}`
	}
	body := []byte(`{"model":"m","max_tokens":256,"messages":[` + strings.Join(msgs, ",") + `]}`)
	for _, ep := range []bound.Endpoint{bound.Chat, bound.Messages} {
		b.Run(ep.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				parsePrepare(b, m, ep, body)
			}
		})
	}
}

func parsePrepare(b *testing.B, m *bound.Model, ep bound.Endpoint, body []byte) {
	req, err := bound.Parse(ep, body, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := req.Prepare(m, native{}); err != nil {
		b.Fatal(err)
	}
}

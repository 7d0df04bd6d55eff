package upstream_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
)

// BenchmarkParsePrepare is the gateway's whole work on a body before the
// reservation: decode, check names, estimate, rewrite. The conversation is
// 20 messages of prose with a tool, counted from the cache after the first
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
		req, err := upstream.ParseRequest(upstream.Chat, body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := req.Prepare(m); err != nil {
			b.Fatal(err)
		}
	}
}

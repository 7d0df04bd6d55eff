package upstream_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/upstream"
)

// A server that reads only max_tokens gets the cap there, whatever field
// the client used: a cap it ignored would leave the output unbounded.
func TestACapFieldPresetMovesTheCap(t *testing.T) {
	m := model(t, "o200k_base")
	m.CapField = "max_tokens"
	for _, tc := range []struct {
		desc, body string
		want       int64
	}{
		{"no cap: the default, in max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 512},
		{"max_completion_tokens moves", `{"model":"m","max_completion_tokens":77,"messages":[{"role":"user","content":"hi"}]}`, 77},
		{"max_tokens stays", `{"model":"m","max_tokens":66,"messages":[{"role":"user","content":"hi"}]}`, 66},
	} {
		p, err := prepare(t, m, upstream.Chat, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		body := gjson.ParseBytes(p.Body)
		if body.Get("max_tokens").Int() != tc.want || body.Get("max_completion_tokens").Exists() || p.OutputCap != tc.want {
			t.Errorf("%s: forwarded %s (cap %d)", tc.desc, p.Body, p.OutputCap)
		}
	}
}

// A server whose streams carry usage unasked gets no stream_options (it
// may refuse the field), and the client gets the usage as it comes.
func TestAnUnaskedUsagePresetSendsNoStreamOptions(t *testing.T) {
	for _, mode := range []string{"always", "x_groq"} {
		m := model(t, "o200k_base")
		m.StreamUsage = mode
		p, err := prepare(t, m, upstream.Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(p.Body), "stream_options") || !p.ClientWantsUsage {
			t.Errorf("%s: forwarded %s, client wants usage %v", mode, p.Body, p.ClientWantsUsage)
		}
	}
}

// Groq reports a stream's usage in x_groq on its last chunk.
func TestGroqStreamUsage(t *testing.T) {
	meter := upstream.NewStreamMeter(1 << 10)
	for _, ev := range []string{
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"queue_time":0.01,"prompt_tokens":12,"prompt_time":0.002,"completion_tokens":3,"completion_time":0.01,"total_tokens":15,"total_time":0.02}}}`,
	} {
		if usageOnly, err := meter.Observe([]byte(ev)); err != nil || usageOnly {
			t.Fatalf("%s: usage-only %v, %v", ev, usageOnly, err)
		}
	}
	if u, ok := meter.Usage(); !ok || u.InputTokens != 12 || u.OutputTokens != 3 {
		t.Fatalf("usage %+v %v", u, ok)
	}
}

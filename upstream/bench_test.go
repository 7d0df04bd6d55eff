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
		parsePrepare(b, m, upstream.Chat, body)
	}
}

// BenchmarkParsePrepareLong is a 200-message conversation (186 KB) sent as
// an OpenAI chat and as an Anthropic Messages request: the same text, each
// parsed and estimated (cached counts after the first op).
func BenchmarkParsePrepareLong(b *testing.B) {
	m := model(b, "o200k_base")
	msgs := make([]string, 200)
	for i := range msgs {
		msgs[i] = `{"role":"` + []string{"user", "assistant"}[i%2] + `","content":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) + `"}`
	}
	body := []byte(`{"model":"m","max_tokens":256,"messages":[` + strings.Join(msgs, ",") + `]}`)
	for _, ep := range []upstream.Endpoint{upstream.Chat, upstream.Messages} {
		b.Run(ep.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				parsePrepare(b, m, ep, body)
			}
		})
	}
}

// BenchmarkStreamMeter is the meter's work on a chat stream as the
// gateway relays it with a cap the reply reaches: every chunk observed,
// its text read and counted once the text could pass the cap (as the
// gateway's outputCount does). The chunks are OpenAI's (usage null on
// each, a random obfuscation string), 27 of two tokens each, the finish
// chunk and the usage chunk; one op is one stream.
func BenchmarkStreamMeter(b *testing.B) {
	m := model(b, "o200k_base")
	words := strings.Fields("in to and of the but not has one more will all can we was an at from or are by this be on with as it for that is")
	head := `{"id":"chatcmpl-sim6df58b40bc6da169","object":"chat.completion.chunk","created":1796193993,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_simulated","choices":[{"index":0,"delta":{`
	tail := `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"`
	chunks := [][]byte{[]byte(head + `"role":"assistant","content":"","refusal":null` + tail + `mk2V"}`)}
	for i := range 27 {
		text := " " + words[(2*i)%len(words)] + " " + words[(2*i+1)%len(words)]
		chunks = append(chunks, []byte(head+`"content":"`+text+`"`+tail+strings.Repeat("x", 3+i%11)+`"}`))
	}
	chunks = append(chunks, []byte(head+`},"logprobs":null,"finish_reason":"length"}],"usage":null,"obfuscation":"Qa"}`),
		[]byte(`{"id":"chatcmpl-sim6df58b40bc6da169","object":"chat.completion.chunk","created":1796193993,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_simulated","choices":[],"usage":{"prompt_tokens":28,"completion_tokens":54,"total_tokens":82,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"Zk"}`),
		[]byte("[DONE]"))
	const bound = 50
	b.ReportAllocs()
	for b.Loop() {
		meter := upstream.NewStreamMeter(bound * 16)
		counted, read := int64(0), 0
		for _, c := range chunks {
			if _, err := meter.Observe(c); err != nil {
				b.Fatal(err)
			}
			if text := meter.Text(); counted+int64(len(text)-read) > bound {
				counted += m.Counter.Count(text[read:])
				read = len(text)
			}
		}
		if _, ok := meter.Usage(); !ok || counted == 0 {
			b.Fatal("no usage, or nothing counted")
		}
		meter.Release()
	}
}

// BenchmarkStreamMeterChunk is the meter's work on one chunk of a long
// stream, past its first chunks: the common chunk, with the head and tail
// of the chunk before it and its own text. One op is one chunk.
func BenchmarkStreamMeterChunk(b *testing.B) {
	head := `{"id":"chatcmpl-sim6df58b40bc6da169","object":"chat.completion.chunk","created":1796193993,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_simulated","choices":[{"index":0,"delta":{`
	tail := `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"`
	chunks := [][]byte{
		[]byte(head + `"content":" more will"` + tail + `pA9WC9qMF"}`),
		[]byte(head + `"content":" all can"` + tail + `SvTwBq43ff1wWm"}`),
		[]byte(head + `"content":" we was"` + tail + `7bM"}`),
		[]byte(head + `"content":" an at"` + tail + `nM0S6oL1"}`),
	}
	meter := upstream.NewStreamMeter(1 << 30)
	for _, c := range chunks {
		_, _ = meter.Observe(c)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := meter.Observe(chunks[i&3]); err != nil {
			b.Fatal(err)
		}
		if i++; i&(1<<16-1) == 0 { // the text grows; start again now and then
			meter.Release()
			meter = upstream.NewStreamMeter(1 << 30)
			for _, c := range chunks {
				_, _ = meter.Observe(c)
			}
		}
	}
}

// BenchmarkUsageFromJSON reads the usage of a chat completion as the
// simulator (and OpenAI) writes it: 566 bytes, the usage last, validated
// on the way.
func BenchmarkUsageFromJSON(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-simbf19bbe4d11e1d04","object":"chat.completion","created":1796238157,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" at from or are by this be on with as it for that is in to and of the but not has one more will all can we was an at from or are by this be on with as it for that is in to and of the but","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":28,"completion_tokens":50,"total_tokens":78},"service_tier":"default","system_fingerprint":"fp_simulated"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, ok := upstream.UsageFromJSON(body); !ok {
			b.Fatal("no usage")
		}
	}
}

// BenchmarkParsePrepareSmall is the gateway benchmark's request
// (bench/gateway-callgrind.sh): a system prompt and a question, a cap.
func BenchmarkParsePrepareSmall(b *testing.B) {
	m := model(b, "o200k_base")
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		parsePrepare(b, m, upstream.Chat, body)
	}
}

// parsePrepare is the gateway's work on a body before the reservation.
func parsePrepare(b *testing.B, m *upstream.Model, ep upstream.Endpoint, body []byte) {
	req, err := upstream.ParseRequest(ep, body)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := req.Prepare(m); err != nil {
		b.Fatal(err)
	}
}

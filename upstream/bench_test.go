package upstream_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// BenchmarkStreamMeter is the meter's work on a chat stream as the
// gateway relays it with a cap the reply reaches: every chunk observed,
// its text read and counted once the text could pass the cap (as the
// gateway's outputCount does). The chunks are OpenAI's (usage null on
// each, a random obfuscation string), 27 of two tokens each, the finish
// chunk and the usage chunk; one op is one stream.
func BenchmarkStreamMeter(b *testing.B) {
	counter, err := tokenizer.Load("o200k_base")
	if err != nil {
		b.Fatal(err)
	}
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
				counted += counter.Count(text[read:])
				read = len(text)
			}
		}
		if !meter.Usage().Reported() || counted == 0 {
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

// BenchmarkAnswerUsage reads the usage of a chat completion as the
// simulator (and OpenAI) writes it: 566 bytes, the usage last.
func BenchmarkAnswerUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-simbf19bbe4d11e1d04","object":"chat.completion","created":1796238157,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" at from or are by this be on with as it for that is in to and of the but not has one more will all can we was an at from or are by this be on with as it for that is in to and of the but","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":28,"completion_tokens":50,"total_tokens":78},"service_tier":"default","system_fingerprint":"fp_simulated"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := convert.AnswerUsage(convert.OpenAI, body); err != nil {
			b.Fatal("no usage")
		}
	}
}

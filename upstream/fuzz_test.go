package upstream_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/aws/smithy-go/eventstream"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// FuzzStream: broken framing, malformed JSON and absurd usage never panic,
// never yield a negative or inconsistent usage, and every byte is returned
// in some event's raw bytes (nothing dropped silently).
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":-3}}\n\n"))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":1e30,\"completion_tokens\":null}}\r\n\r\n"))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\ndata: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}\n\n"))
	f.Add([]byte(": comment\nevent: x\ndata: {\"choices\":[{\"text\":\"a\"}]}\ndata: more\n\n\n\ndata: {\"cho"))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-4}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		meter := upstream.NewStreamMeter(1 << 16)
		if len(stream) > 0 {
			switch stream[0] % 3 {
			case 1:
				meter = upstream.NewAnthropicStreamMeter(1 << 16)
			case 2:
				meter = upstream.NewResponsesStreamMeter(1 << 16)
			}
		}
		events := upstream.NewEventReader(bytes.NewReader(stream))
		var relayed []byte
		for {
			raw, data, err := events.Next()
			relayed = append(relayed, raw...)
			if len(raw) > 0 {
				_, _ = meter.Observe(data)
			}
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && err != upstream.ErrEventTooLarge {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
		}
		if u := meter.Usage(); u.Reported() {
			if u.Input < 0 || u.Output < 0 || u.CachedInput+u.CacheWrite > u.Input || u.Reasoning > u.Output {
				t.Fatalf("meter kept invalid usage %+v", u)
			}
		}
		if len(bytes.TrimSpace(relayed)) < len(bytes.TrimSpace(stream)) && !bytes.Equal(bytes.TrimSpace(stream), bytes.TrimSpace(relayed)) {
			// Blank lines between events may be dropped; content may not.
			if !bytes.Equal(stripBlank(stream), stripBlank(relayed)) {
				t.Fatalf("relayed %q of %q", relayed, stream)
			}
		}
	})
}

func stripBlank(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// FuzzAnswerUsage: whatever an answer holds, its usage is read whole or
// not at all, never negative, its parts never larger than their whole;
// and a figure it does not hold is not reported.
func FuzzAnswerUsage(f *testing.F) {
	f.Add(uint8(0), []byte(`{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`))
	f.Add(uint8(0), []byte(`{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":40}}}`))
	f.Add(uint8(0), []byte(`{"usage":null}`))
	f.Add(uint8(0), []byte(`{"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`))
	f.Add(uint8(1), []byte(`{"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":4,"cache_read_input_tokens":3}}`))
	f.Add(uint8(1), []byte(`{"usage":{"input_tokens":-1,"output_tokens":5}}`))
	f.Add(uint8(2), []byte(`{"usageMetadata":{"promptTokenCount":5,"totalTokenCount":9}}`))
	wires := []convert.Wire{convert.OpenAI, convert.Anthropic, convert.Gemini, convert.Converse, convert.Responses}
	f.Fuzz(func(t *testing.T, w uint8, body []byte) {
		u, err := convert.AnswerUsage(wires[int(w)%len(wires)], body)
		if err != nil {
			if u.Reported() {
				t.Fatalf("an unusable answer reported %+v", u)
			}
			return
		}
		if u.Input < 0 || u.Output < 0 || u.CachedInput < 0 || u.CacheWrite < 0 || u.Reasoning < 0 ||
			u.CachedInput+u.CacheWrite+u.InputAudio > u.Input || u.Reasoning > u.Output || u.OutputAudio > u.Output {
			t.Fatalf("accepted invalid usage %+v", u)
		}
		if u.Has&convert.HasInput == 0 && u.Input != 0 || u.Has&convert.HasOutput == 0 && u.Output != 0 {
			t.Fatalf("a figure not reported is not 0: %+v", u)
		}
	})
}

// FuzzFrames: whatever bytes a Bedrock stream carries, the event-stream
// source never panics, never returns more than a frame's bound (1 MiB),
// ends, and
// every event it returns decodes or is refused cleanly.
func FuzzFrames(f *testing.F) {
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range []struct{ typ, payload string }{
		{"messageStart", `{"role":"assistant"}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`},
		{"messageStop", `{"stopReason":"end_turn"}`},
		{"metadata", `{"usage":{"inputTokens":9,"outputTokens":2,"totalTokens":11}}`},
	} {
		msg := eventstream.Message{Payload: []byte(ev.payload)}
		msg.Headers.Set(":event-type", eventstream.StringValue(ev.typ))
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		_ = enc.Encode(&b, msg)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:b.Len()/2])
	f.Fuzz(func(t *testing.T, raw []byte) {
		src := upstream.NewEventSource(convert.Converse, bytes.NewReader(raw))
		dec := convert.NewDecoder(convert.Converse, "")
		for i := 0; ; i++ {
			name, data, err := src.Next()
			if err != nil {
				return
			}
			if len(data) > 1<<20 || i > len(raw) {
				t.Fatalf("event %d of %d bytes from %d bytes of input", i, len(data), len(raw))
			}
			_, _ = dec.Decode(name, data)
		}
	})
}

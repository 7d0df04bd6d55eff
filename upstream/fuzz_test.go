package upstream_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/aws/smithy-go/eventstream"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// FuzzPrepare: no input panics; an accepted request re-parses from its own
// forwarded body to the same bound (what is forwarded is what was estimated).
func FuzzPrepare(f *testing.F) {
	for _, c := range corpus {
		f.Add(uint8(upstream.Chat), []byte(c))
	}
	f.Add(uint8(upstream.Completions), []byte(`{"model":"m","prompt":[[1,2],[3]],"max_tokens":3,"best_of":2}`))
	f.Add(uint8(upstream.Embeddings), []byte(`{"model":"m","input":["a","b"]}`))
	f.Add(uint8(upstream.Chat), []byte(`{"model":"m","max_tokens":1e2,"max_tokens":null,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`))
	f.Add(uint8(upstream.Chat), []byte(`{"model":"m","N":3,"\u017ftream":true,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"low"}}]}]}`))
	f.Add(uint8(upstream.Completions), []byte(`{"model":"m","prompt":["a","b",[1,2]],"n":2,"best_of":3,"max_tokens":7}`))
	f.Add(uint8(upstream.Chat), []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"prediction":{"type":"content","content":[{"type":"text","text":"abc"}]},"service_tier":"flex"}`))
	// The messages twice, the last key escaped: the last is forwarded and
	// must be what is estimated.
	f.Add(uint8(upstream.Chat), []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"messag\u0065s":[{"role":"user","content":"a longer text than x"}]}`))
	m := model(f, "o200k_base")
	emb := *m
	emb.Embedding, emb.MaxOutputTokens, emb.DefaultOutputTokens = true, 0, 0
	f.Add(uint8(upstream.Messages), []byte(`{"model":"m","max_tokens":50,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{}},{"type":"tool_result","tool_use_id":"t","content":"42"}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"calc","input":{"x":1}}]}]}`))
	f.Add(uint8(upstream.Responses), []byte(`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","name":"f","arguments":"{}","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"42"}],"tools":[{"type":"function","name":"f","parameters":{}}]}`))
	f.Fuzz(func(t *testing.T, ep uint8, body []byte) {
		e := upstream.Endpoint((ep+4)%5 + 1) // a seed's uint8(E) is E (1..5)
		mm := m
		if e == upstream.Embeddings {
			mm = &emb
		}
		// The endpoint byte's high part picks a server's quirks: the cap
		// field it honours and how its streams report usage.
		switch q := *mm; (ep / 5) % 3 {
		case 1:
			q.CapField, q.StreamUsage = "max_tokens", "always"
			mm = &q
		case 2:
			q.CapField, q.StreamUsage = "max_tokens", "x_groq"
			mm = &q
		}
		req, err := upstream.ParseRequest(e, body)
		if err != nil {
			return
		}
		p, err := req.Prepare(mm)
		if err != nil {
			return
		}
		if !json.Valid(p.Body) {
			t.Fatalf("forwarded body is not JSON: %s", p.Body)
		}
		if p.InputTokens < 0 || p.MaxOutputTokens < 0 || p.MaxOutputTokens > mm.MaxOutputTokens*128*128+int64(len(body)) {
			t.Fatalf("bound out of range: %+v", p)
		}
		again, err := upstream.ParseRequest(e, p.Body)
		if err != nil {
			t.Fatalf("forwarded body does not parse: %v", err)
		}
		p2, err := again.Prepare(mm)
		if err != nil {
			t.Fatalf("forwarded body does not prepare: %v", err)
		}
		if p2.InputTokens != p.InputTokens || p2.MaxOutputTokens != p.MaxOutputTokens {
			t.Fatalf("forwarded body estimates %d+%d, the client's %d+%d", p2.InputTokens, p2.MaxOutputTokens, p.InputTokens, p.MaxOutputTokens)
		}
	})
}

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
		if u, ok := meter.Usage(); ok {
			if err := u.Validate(); err != nil {
				t.Fatalf("meter kept invalid usage %+v: %v", u, err)
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

func FuzzUsageFromJSON(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":40}}}`))
	f.Add([]byte(`{"usage":null}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok := upstream.UsageFromJSON(body)
		if ok {
			if err := u.Validate(); err != nil {
				t.Fatalf("accepted invalid usage %+v: %v", u, err)
			}
		}
	})
}

func FuzzUsageFromAnthropicJSON(f *testing.F) {
	f.Add([]byte(`{"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":4,"cache_read_input_tokens":3}}`))
	f.Add([]byte(`{"usage":{"input_tokens":-1,"output_tokens":5}}`))
	f.Add([]byte(`{"usage":{"input_tokens":1099511627776,"output_tokens":1,"cache_read_input_tokens":1099511627776}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok := upstream.UsageFromAnthropicJSON(body)
		if ok {
			if err := u.Validate(); err != nil {
				t.Fatalf("accepted invalid usage %+v: %v", u, err)
			}
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

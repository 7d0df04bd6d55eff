package upstream_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate-dev/tollgate/upstream"
)

func TestStreamMeterKeepsGeneratedText(t *testing.T) {
	tests := []struct {
		desc, chunk, want string
	}{
		{"chat delta", `{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`, "Hello"},
		{"escapes", `{"choices":[{"delta":{"content":"say \"hi\"\n\u00e9\\"}}]}`, "say \"hi\"\né\\"},
		{"space after colon", `{"choices": [{"delta": {"content" : "spaced"}}]}`, "spaced"},
		{"logprobs content array is not text", `{"choices":[{"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1}]}}]}`, "a"},
		{"null content", `{"choices":[{"delta":{"content":null,"refusal":"no"}}]}`, "no"},
		{"key text inside a value is not a key", `{"choices":[{"delta":{"content":"x \"content\": \"y\""}}]}`, `x "content": "y"`},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"get","arguments":"{\"q\":1}"}}]}}]}`, `get{"q":1}`}, // in the order they come
		{"an unknown key's string value is passed over", `{"id":"content","choices":[{"delta":{"content":"z"}}],"x":{"text":7}}`, "z"},
		{"legacy completion", `{"object":"text_completion","choices":[{"text":" world","index":0}]}`, " world"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := upstream.NewStreamMeter(1 << 10)
			if _, err := m.Observe([]byte(tc.chunk)); err != nil {
				t.Fatal(err)
			}
			if got := m.Text(); got != tc.want {
				t.Fatalf("Text() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStreamMeterUsage(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":3}}}\n\n" +
		"data: [DONE]\n\n"
	m := upstream.NewStreamMeter(1 << 10)
	r := upstream.NewEventReader(strings.NewReader(stream))
	var usageOnly []bool
	for {
		_, data, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		u, err := m.Observe(data)
		if err != nil {
			t.Fatal(err)
		}
		usageOnly = append(usageOnly, u)
	}
	u := m.Usage()
	if !u.Reported() || u.Input != 5 || u.Output != 2 || u.CachedInput != 3 {
		t.Fatalf("usage = %+v: cumulative usage must be counted once, the last report winning", u)
	}
	if want := []bool{false, false, true, false}; len(usageOnly) != 4 || usageOnly[1] || !usageOnly[2] {
		t.Fatalf("usage-only flags = %v, want %v", usageOnly, want)
	}
	if !m.Done() {
		t.Fatal("[DONE] not seen")
	}
}

func TestEventReaderTruncated(t *testing.T) {
	r := upstream.NewEventReader(strings.NewReader("data: {\"a\":1}\n\ndata: {\"b\""))
	if _, data, err := r.Next(); err != nil || string(data) != `{"a":1}` {
		t.Fatalf("first event: %q %v", data, err)
	}
	raw, data, err := r.Next()
	if err != io.ErrUnexpectedEOF || string(data) != `{"b"` || string(raw) != `data: {"b"` {
		t.Fatalf("cut event: raw %q data %q err %v", raw, data, err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the cut: %v", err)
	}
}

// FuzzEventReader: events read from a buffer holding them whole (the
// reader returns a one-data-line event from its buffer, uncopied) are the
// events read a byte at a time (line by line, copied): the same raw bytes,
// data and errors, in the same order — and a released reader's buffer
// serves the next stream as a new one.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n"))
	f.Add([]byte("data:x\n\n\n\nevent: e\ndata: y\n\ndata: a\ndata: b\n\ndata: c\r\rd\n\n: comment\n\ndata: cut"))
	f.Add([]byte("data: a\r\n\ndata: b\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		type event struct {
			raw, data string
			err       error
		}
		read := func(r io.Reader) (evs []event) {
			er := upstream.NewEventReader(r)
			defer er.Release()
			for range 1000 {
				raw, data, err := er.Next()
				evs = append(evs, event{string(raw), string(data), err})
				if err != nil {
					return evs
				}
			}
			return evs
		}
		want := read(iotest.OneByteReader(bytes.NewReader(stream)))
		for _, got := range [][]event{read(bytes.NewReader(stream)), read(iotest.HalfReader(bytes.NewReader(stream)))} {
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("event %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
		}
	})
}

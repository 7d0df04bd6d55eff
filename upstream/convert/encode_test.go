package convert

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/tollgate/internal/jsonx"
)

// stdMarshal is what marshal stands in for: encoding/json without HTML
// escaping.
func stdMarshal(v any) ([]byte, error) { return jsonx.Marshal(v) }

// FuzzMarshal: marshal writes the bytes encoding/json writes, and fails
// where it fails, for any JSON decoded into interfaces and for the typed
// maps, slices, numbers, raw messages and strings (UTF-8 or not) the
// translations build.
func FuzzMarshal(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.5,-0,1e21,1e-7,"x<>&\u2028"],"a":{"z":null,"y":true}}`), "hé\x00\u2029\xff\"\\\b\f\n\r\t", int64(-7), 1e-9)
	f.Add([]byte(` { "a" : [ 1 , 2 ] } `), "plain text that is long enough for the words", int64(1<<53), 123456789.125)
	f.Add([]byte(`{"a":`), "", int64(0), math.Inf(1))
	f.Add([]byte(`123456789012345678901234567890`), "\xed\xa0\x80 surrogate", int64(42), math.NaN())
	f.Fuzz(func(t *testing.T, data []byte, s string, n int64, x float64) {
		var decoded any
		values := []any{
			map[string]any{
				"s": s, s: n, "x": x, "i": int(n), "raw": json.RawMessage(data), "nilraw": json.RawMessage(nil),
				"list": []map[string]any{{"k": s, "v": []any{s, x, nil, false}}}, "ss": []string{s, "", s},
				"ms": map[string]string{s: s, "b": "c"}, "nil": nil, "nilmap": map[string]any(nil), "nillist": []any(nil),
				"other": []int{1, 2}, "ptr": &x,
			},
			s, x, n,
		}
		if json.Unmarshal(data, &decoded) == nil {
			values = append(values, decoded, []any{decoded, decoded})
		}
		for _, v := range values {
			got, err := marshal(v)
			want, werr := stdMarshal(v)
			if (err == nil) != (werr == nil) {
				t.Fatalf("marshal(%#v): error %v, encoding/json's %v", v, err, werr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("marshal(%#v)\n = %s\nencoding/json: %s", v, got, want)
			}
		}
	})
}

// FuzzAnthropicTextDelta: where the fast read of a text delta takes an
// event, the event is valid JSON that gjson reads as a text delta of the
// same text.
func FuzzAnthropicTextDelta(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":" world, é 你好"}}`,
		`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`,
		"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text, ok := anthropicTextDelta(data)
		if !ok {
			return
		}
		r := gjson.ParseBytes(data)
		if !gjson.ValidBytes(data) || r.Get("type").String() != "content_block_delta" || r.Get("delta.type").String() != "text_delta" ||
			r.Get("delta.text").String() != text {
			t.Fatalf("fast read of %s: %q; gjson: valid %v, %s", data, text, gjson.ValidBytes(data), r.Get("delta"))
		}
	})
}

// FuzzTextChunk: the text chunk written directly is the chunk the general
// path writes through its maps, byte for byte.
func FuzzTextChunk(f *testing.F) {
	f.Add("Hello", "msg_01", "gpt-4o", int64(1796228149))
	f.Add("a\"b\\c\n\x00\u2028\xff é", "", "m\"odel", int64(-1))
	f.Fuzz(func(t *testing.T, text, id, model string, created int64) {
		e := NewEncoder(OpenAI, model, false)
		e.id, e.created, e.started = id, created, true
		check := func(when string) {
			t.Helper()
			e.buf.Reset()
			e.chunk(map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": nil})
			want := bytes.Clone(e.buf.Bytes())
			e.buf.Reset()
			e.textChunk(text)
			if got := e.buf.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("text chunk %q %s\n = %s\nthrough the maps: %s", text, when, got, want)
			}
		}
		check("first")
		check("from the kept tail")
		e.id = id + "x" // a stream's id set late: the tail follows it
		check("after the id changed")
	})
}

package convert

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// stdMarshal is what marshal stands in for: encoding/json without HTML
// escaping.
func stdMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

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

package upstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// tree is what walking a validated text with the scanner reads: the value
// encoding/json decodes (with UseNumber), built from members, elements,
// str and the raw text of numbers and literals.
func tree(t *testing.T, v jnode, text string) any {
	t.Helper()
	if v.raw != text[v.at:v.at+len(v.raw)] {
		t.Fatalf("a value at %d is %q, the text there %q", v.at, v.raw, text[v.at:v.at+len(v.raw)])
	}
	switch {
	case v.isObject():
		m := map[string]any{}
		for k, val := range v.members() {
			if k.raw != text[k.at:k.at+len(k.raw)] {
				t.Fatalf("a key at %d is %q", k.at, k.raw)
			}
			key, ok := str(k)
			if !ok {
				t.Fatalf("key %s is not a string", k.raw)
			}
			m[key] = tree(t, val, text) // the last of duplicates wins, as in encoding/json
		}
		return m
	case v.isArray():
		a := []any{}
		for e := range v.elements() {
			a = append(a, tree(t, e, text))
		}
		return a
	case v.isString():
		s, ok := str(v)
		if !ok {
			t.Fatalf("string %s does not decode", v.raw)
		}
		return s
	case v.isNumber():
		return json.Number(v.raw)
	case v.raw == "true":
		return true
	case v.raw == "false":
		return false
	case v.raw == "null":
		return nil
	}
	t.Fatalf("%q is no JSON value", v.raw)
	return nil
}

// FuzzWalk: over any text validJSON accepts, the scanner's walk reads the
// value encoding/json decodes, and each value's offset points at its text.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		` [1, -2.5e+3 ,true,false,null, "a\"b\\", {"":{}} , [] ] `,
		`{"a":"\u00e9\ud83d\ude00","a":2, "b" : [ "x" , { "c" : null } ] }`,
		`"just a string"`, `12`, `{"k\"ey":"v"}`, "{\"\xff\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !validJSON(b) {
			return
		}
		var want any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatalf("validJSON accepted %q, which encoding/json does not decode: %v", b, err)
		}
		if got := tree(t, root(b), string(b)); !reflect.DeepEqual(got, want) {
			t.Fatalf("walk of %q:\n got %#v\nwant %#v", b, got, want)
		}
	})
}

// TestValidJSONStrings: the eight-bytes-at-a-time string scan finds a
// quote, a backslash or a control character at each position of a word.
func TestValidJSONStrings(t *testing.T) {
	for n := range 20 {
		for _, c := range []string{`"`, `\`, "\x00", "\x1f", "\n", `\u00e9`, `\q`, "\x7f", "\xff", " "} {
			s := `"` + strings.Repeat("a", n) + c + strings.Repeat("b", 9) + `"`
			for _, text := range []string{s, `{` + s + `:1}`, `[` + s + `]`} {
				b := []byte(text)
				if got, want := validJSON(b), json.Valid(b); got != want {
					t.Errorf("validJSON(%q) = %v, json.Valid %v", b, got, want)
				}
			}
		}
	}
}

// FuzzMayHoldUsage: a chunk whose usage the full parse finds is never
// passed over by the quick test.
func FuzzMayHoldUsage(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null,"obfuscation":"x"}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"choices":[{"delta":{"content":"usage\":null"}}],"usage" : {"prompt_tokens":1}}`,
		`{"x_groq":{"id":"r","usage":{"prompt_tokens":3}},"usage":null}`,
		`{"usage":nullx}`, `{"usage":   null, "usage":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !validJSON(data) {
			return
		}
		chunk := root(data)
		if (chunk.get("usage").isObject() || chunk.get("x_groq").get("usage").isObject()) && !mayHoldUsage(data) {
			t.Fatalf("mayHoldUsage(%s) = false, and it holds usage", data)
		}
	})
}

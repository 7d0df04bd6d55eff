package upstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/budget"
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

// TestQuoteAfter: over valid strings with quotes and runs of backslashes
// at each place of the first words, and text after the closing quote that
// holds more of them, quoteAfter ends each where stringEnd does.
func TestQuoteAfter(t *testing.T) {
	for n := range 18 {
		for _, c := range []string{``, `\"`, `\\`, `\\\"`, `\n`, `\u0022`} {
			for _, after := range []string{``, `"`, `\"x"`, `,"k":"v"}`, `  `} {
				for _, pad := range []int{0, 3, 11} {
					body := strings.Repeat("a", n) + c + strings.Repeat("b", pad)
					s := `"` + body + `"` + after
					want := stringEnd(s, 1)
					if want != len(body)+2 {
						t.Fatalf("stringEnd(%q) = %d: not a valid string", s, want)
					}
					if got := quoteAfter(s, 1); got != want {
						t.Errorf("quoteAfter(%q) = %d, want %d", s, got, want)
					}
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

// FuzzObserveUsageInSequence: a meter that starts its usage search past
// the head it knows finds every usage a full parse of each chunk finds:
// over chunks a, b, b, a, b (b is a's first cut bytes followed by tail, as
// the chunks of one stream share their head), read each chunk's text as it
// came, it holds after each chunk the last usage reported so far.
func FuzzObserveUsageInSequence(f *testing.F) {
	head := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`
	f.Add([]byte(head+`hi"}}],"usage":null}`), uint16(len(head)), []byte(`x"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	f.Add([]byte(`{"usage":null,"choices":[{"delta":{"content":"a"}}]}`), uint16(9), []byte(`{"prompt_tokens":2},"choices":[]}`))
	// The usage key opens with the head's last quote, where the text key did.
	f.Add([]byte(`{"content":"hi"}`), uint16(2), []byte(`usage":{"prompt_tokens":2},"content":"x"}`))
	f.Add([]byte(`{"choices":[{"delta":{"text":"a"}}],"x_groq":null}`), uint16(24), []byte(`"b"}}],"x_groq":{"usage":{"prompt_tokens":5}}}`))
	// Chunks sharing a tail with "usage": null (usageNullByTail), and
	// usage after it, or in the first value, or in the tail's last value.
	obf := `"}}],"usage":null,"obfuscation":"`
	f.Add([]byte(head+`hi`+obf+`k2V"}`), uint16(len(head)), []byte(`yo`+obf+`q","x_groq":{"usage":{"prompt_tokens":3,"completion_tokens":1}}}`))
	f.Add([]byte(head+`hi`+obf+`k2V"}`), uint16(len(head)), []byte(`usage`+obf+`usage"}`))
	f.Add([]byte(head+`hi`+obf+`k2V"}`), uint16(len(head)), []byte(`a\"},"usage":{"prompt_tokens":4},"x":"`+obf+`z"}`))
	// Text after the tail's last value.
	f.Add([]byte(head+`hi`+obf+`k2V"}`), uint16(len(head)), []byte(`yo`+obf+`q","content":"more","x":"y"}`))
	// Chunks that leave the head halfway (resume): inside a string, after
	// a key, after a value whose next byte is past the shared bytes.
	role := `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null}}],"usage":null}`
	f.Add([]byte(role), uint16(strings.Index(role, `role`)), []byte(`content":"hi"}}],"usage":null}`))
	f.Add([]byte(role), uint16(strings.Index(role, `"choices"`)+11), []byte(`],"usage":{"prompt_tokens":2,"completion_tokens":1}}`))
	f.Add([]byte(`{"type":"content" ,"text":"a"}`), uint16(17), []byte(`:"b","text":"c"}`))
	f.Add([]byte(`{"a":"content"  ,"text":"a"}`), uint16(15), []byte(` :"b"}`))
	f.Fuzz(func(t *testing.T, a []byte, cut uint16, tail []byte) {
		b := append(a[:int(cut)%(len(a)+1):int(cut)%(len(a)+1)], tail...)
		// A meter used and released first: the next is likely the same
		// one, and must start afresh.
		used := NewStreamMeter(1 << 20)
		for _, c := range [][]byte{b, a} {
			_, _ = used.Observe(c)
			used.Text()
		}
		used.Release()
		m := NewStreamMeter(1 << 20)
		var want budget.Usage
		var has bool
		// Read as they come, the text is each chunk's read afresh too.
		var wantText string
		for i, c := range [][]byte{a, b, b, a, b} {
			_, _ = m.Observe(c)
			text := m.Text() // reads the chunk: the head it keeps is the next chunk's
			if c = bytes.TrimSpace(c); !bytes.Equal(c, []byte("[DONE]")) {
				fresh := NewStreamMeter(1 << 20)
				fresh.keepStrings(c)
				if wantText += fresh.Text(); text != wantText {
					t.Fatalf("chunks %q, %q: after chunk %d text %q, each read afresh %q", a, b, i, text, wantText)
				}
			}
			if validJSON(c) {
				chunk := root(c)
				u := chunk.get("usage")
				if !u.isObject() {
					u = chunk.get("x_groq").get("usage")
				}
				if got, err := decodeUsage(u); u.isObject() && err == nil {
					want, has = got, true
				}
			}
			if got, ok := m.Usage(); ok != has || got != want {
				t.Fatalf("chunks %q, %q: after chunk %d usage %+v %v, a full parse of each: %+v %v", a, b, i, got, ok, want, has)
			}
		}
	})
}

// FuzzValidFind: validating and finding a top-level member in one pass
// answers what validJSON and then get answer.
func FuzzValidFind(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"message":{"usage":1}}],"usage":{"prompt_tokens":1}}`,
		`{"usag\u0065" : {"a":1}, "usage":2}`, `{"usage":null}`, `[{"usage":1}]`, `{"a":{"usage":1}}`,
		`{"a:usage" :1,"usage"  :  [1]}`, `{"usage":1`, `"usage"`,
		` { "a" : { "b" : [ 1 , { } ] } , "c":"\"}" ,"d":-1.5e3} `, `{}`, `[]`, `{"a":[]}`,
	} {
		f.Add([]byte(s), "usage")
	}
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		if len(b) == 0 || key == "" {
			return
		}
		ok, at := validFind(string(b), key)
		if ok != json.Valid(b) {
			t.Fatalf("validFind(%q) = %v, json.Valid %v", b, ok, !ok)
		}
		if !ok {
			return
		}
		if want := getAt(b, key); at != want {
			t.Fatalf("validFind(%q, %q) found %d, get %d", b, key, at, want)
		}
		// validTop notes the members that members walks.
		var top []member
		if !validTop(string(b), &top) {
			t.Fatalf("validTop(%q) refused what validFind accepted", b)
		}
		var want []member
		for k, v := range root(b).members() {
			want = append(want, member{keyFrom: k.at, keyTo: k.at + len(k.raw), from: v.at, to: v.at + len(v.raw)})
		}
		if !slices.Equal(top, want) {
			t.Fatalf("validTop(%q) noted %v, members %v", b, top, want)
		}
	})
}

// TestReleasedMeterStartsAfresh: a meter handed back after a stream that
// left it a head, a tail, text, usage, truncation and [DONE] reads the
// next stream as a meter never used does.
func TestReleasedMeterStartsAfresh(t *testing.T) {
	head := `{"id":"c","choices":[{"index":0,"delta":{"content":"`
	obf := `"}}],"usage":null,"obfuscation":"`
	stream := [][]byte{
		[]byte(head + `Hello` + obf + `k2V"}`), []byte(head + ` world` + obf + `q"}`),
		[]byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`), []byte("[DONE]"),
	}
	read := func(m *StreamMeter, chunks [][]byte) (string, budget.Usage, bool, bool, bool) {
		for _, c := range chunks {
			_, _ = m.Observe(c)
		}
		u, ok := m.Usage()
		return m.Text(), u, ok, m.Done(), m.Truncated()
	}
	// A chunk whose head holds its usage: a meter that kept that head
	// but not what it knew of it would not look there for usage.
	usageFirst := []byte(`{"usage":{"prompt_tokens":5,"completion_tokens":1},"choices":[{"index":0,"delta":{"content":"hi"}}]}`)
	used := NewStreamMeter(4)
	read(used, append(stream[:3:3], usageFirst))
	if !used.Truncated() {
		t.Fatal("the first stream was not truncated: the test would not cover it")
	}
	used.Release()
	for i, next := range [][][]byte{{usageFirst}, stream, stream[:1], {[]byte(`{"choices":[{"delta":{"text":"x"}}]}`)}} {
		again := NewStreamMeter(1 << 10)
		got1, got2, got3, got4, got5 := read(again, next)
		w1, w2, w3, w4, w5 := read(&StreamMeter{maxText: 1 << 10}, next)
		if got1 != w1 || got2 != w2 || got3 != w3 || got4 != w4 || got5 != w5 {
			t.Errorf("stream %d after a release: %q %+v %v %v %v; a meter never used: %q %+v %v %v %v",
				i, got1, got2, got3, got4, got5, w1, w2, w3, w4, w5)
		}
		again.Release()
	}
}

// FuzzLastMember: over any bytes lastMember stays in the text and
// UsageFromJSON does not panic; over valid JSON it finds the member
// encoding/json takes (the last of its name), and UsageFromJSON reads the
// usage encoding/json's decoding of the whole body would.
func FuzzLastMember(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"message":{"usage":1}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"usag\u0065" : {"prompt_tokens":3}, "usage":2}`, `{"usage":null}`, `[{"usage":1}]`, `{"a":{"usage":1}}`,
		`{"a:usage" :1,"usage"  :  {"prompt_tokens":4}}`, `{"usage":{"prompt_tokens":1`, `"usage"`, `{"a":"\"usage\":{}","usage":{}}`,
		`{"a":[1,{"b":"]}"}],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":1}}}`, `{"a" "usage"}`, `{"x\`,
		`{"usage":{"prompt_tokens":1},"b":"\\\\\"}\\","c":[{},[]],"d":-1.5e3,"e":true,"f":null}`, ` { "usage" : { } } `, `{}`, `{"usage":{"prompt_tokens":1}, "usage":{"prompt_tokens":2}}`,
	} {
		f.Add([]byte(s), "usage")
	}
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		if len(b) == 0 || key == "" || !utf8.ValidString(key) {
			return // a name the gateway looks for is text
		}
		from, to := lastMember(string(b), key)
		if from < -1 || to > len(b) || from > to || (from < 0) != (to < 0) {
			t.Fatalf("lastMember(%q, %q) = %d, %d: outside the text", b, key, from, to)
		}
		if !json.Valid(b) {
			_, _ = UsageFromJSON(b) // no panic
			return
		}
		var m map[string]json.RawMessage
		wantFrom := -1
		if json.Unmarshal(b, &m) == nil {
			if v, ok := m[key]; ok {
				wantFrom = from // the text is checked below
				if from < 0 || string(b[from:to]) != string(v) {
					t.Fatalf("lastMember(%q, %q) = %q, encoding/json %q", b, key, b[max(from, 0):max(to, 0)], v)
				}
			}
		}
		if from != wantFrom {
			t.Fatalf("lastMember(%q, %q) = %d, encoding/json has no such member", b, key, from)
		}
		var wantU budget.Usage
		wantOK := false
		if v, ok := m["usage"]; ok && v[0] == '{' {
			u, err := decodeUsage(jnode{string(v), 0})
			wantU, wantOK = u, err == nil
		}
		if u, ok := UsageFromJSON(b); u != wantU || ok != wantOK {
			t.Fatalf("UsageFromJSON(%q) = %+v %v, encoding/json's member %+v %v", b, u, ok, wantU, wantOK)
		}
	})
}

// getAt is where get finds the value of b's top-level member key, or -1.
func getAt(b []byte, key string) int {
	if v := root(b).get(key); v.raw != "" {
		return v.at
	}
	return -1
}

package convert

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzLastMember: over any bytes lastMember stays in the text; over valid
// JSON it finds the member encoding/json takes (the last of its name), and
// AnswerUsage reads the usage encoding/json's decoding of the whole body
// would hand ReadUsage.
func FuzzLastMember(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"message":{"usage":1}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"usag\u0065" : {"prompt_tokens":3}, "usage":2}`, `{"usage":null}`, `[{"usage":1}]`, `{"a":{"usage":1}}`,
		`{"a:usage" :1,"usage"  :  {"prompt_tokens":4}}`, `{"usage":{"prompt_tokens":1`, `"usage"`, `{"a":"\"usage\":{}","usage":{}}`,
		`{"a":[1,{"b":"]}"}],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":1}}}`, `{"a" "usage"}`, `{"x\`,
		`{"usage":{"prompt_tokens":1},"b":"\\\\\"}\\","c":[{},[]],"d":-1.5e3,"e":true,"f":null}`, ` { "usage" : { } } `, `{}`,
		`{"usage":{"prompt_tokens":1}, "usage":{"prompt_tokens":2}}`,
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
			_, _ = AnswerUsage(OpenAI, b) // no panic
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
		var want Usage
		var wantErr error = errNoUsage
		if v, ok := m["usage"]; ok && v[0] == '{' {
			want, wantErr = ReadUsage(OpenAI, v)
		}
		if u, err := AnswerUsage(OpenAI, b); u != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("AnswerUsage(%q) = %+v %v, encoding/json's member %+v %v", b, u, err, want, wantErr)
		}
	})
}

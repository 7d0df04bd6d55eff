package convert

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzMembersGet: members answers Get as gjson does on the same valid
// JSON, for the key given and for every member's own key: the first member
// of a name, keys with escapes, duplicates, values that are not objects,
// paths in gjson's syntax.
func FuzzMembersGet(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"model":"n"}`, `{"mod\u0065l":"x","n":2}`, `{"a":{"b":1},"a.b":2}`,
		`[1,{"a":2}]`, `"s"`, `{"tools":[{"type":"function"}],"tool_choice":{"function":{"name":"f"}}}`, `{}`,
	} {
		f.Add([]byte(s), "model")
	}
	f.Add([]byte(`{"a":{"b":1}}`), "a.b")
	f.Add([]byte(`[1,{"a":2}]`), "1")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		if !gjson.ValidBytes(body) {
			return
		}
		r := gjson.ParseBytes(body)
		m := membersOf(r)
		same := func(k string) {
			got, want := m.Get(k), r.Get(k)
			if got.Raw != want.Raw || got.Type != want.Type || got.Str != want.Str || got.Num != want.Num || got.Exists() != want.Exists() {
				t.Fatalf("%s: Get(%q) = %#v, gjson: %#v", body, k, got, want)
			}
		}
		same(key)
		for _, kv := range m.kv {
			same(kv.key)
		}
	})
}

package jsonx

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendEscaped: in JSON style, a string is escaped as encoding/json
// escapes it without HTML escaping, byte for byte, with whatever is
// already in the buffer kept.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"", "plain", "exactly8", "seventeen bytes!!", "tab\tin", "a\"quote at the end\"", "\x00\x1f",
		"\u2028\u2029", "\xff\xfe invalid", "long enough to take two words and then a \\ backslash", "é and 日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := "pre" + b.String()[1:b.Len()-2] // without the quotes and newline
		if got := string(AppendEscaped([]byte("pre"), s, JSON)); got != want {
			t.Fatalf("AppendEscaped(%q) = %q, encoding/json %q", s, got, want)
		}
	})
}

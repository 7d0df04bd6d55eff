package upstream_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream"
)

// Golden files: testdata/usage/NAME.txt holds a kind line (openai-json,
// openai-sse, anthropic-json, anthropic-sse), a recorded body, a "---" line
// and the usage extracted from it.
func TestUsageGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/usage/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			head, want, ok := strings.Cut(string(data), "\n---\n")
			if !ok {
				t.Fatal("no --- separator")
			}
			kind, body, _ := strings.Cut(head, "\n")
			var got string
			switch kind {
			case "openai-json":
				u, ok := upstream.UsageFromJSON([]byte(body))
				got = fmt.Sprintf("%+v ok=%v\n", u, ok)
			case "anthropic-json":
				u, ok := upstream.UsageFromAnthropicJSON([]byte(body))
				got = fmt.Sprintf("%+v ok=%v\n", u, ok)
			case "responses-json":
				u, ok := upstream.UsageFromResponsesJSON([]byte(body))
				got = fmt.Sprintf("%+v ok=%v\n", u, ok)
			case "openai-sse", "anthropic-sse", "responses-sse":
				m := map[string]*upstream.StreamMeter{"openai-sse": upstream.NewStreamMeter(1 << 16),
					"anthropic-sse": upstream.NewAnthropicStreamMeter(1 << 16), "responses-sse": upstream.NewResponsesStreamMeter(1 << 16)}[kind]
				r := upstream.NewEventReader(strings.NewReader(body + "\n"))
				for {
					_, d, err := r.Next()
					if d != nil {
						if _, err := m.Observe(d); err != nil {
							t.Fatal(err)
						}
					}
					if err == io.EOF || err != nil {
						break
					}
				}
				u, ok := m.Usage()
				got = fmt.Sprintf("%+v ok=%v done=%v text=%q\n", u, ok, m.Done(), m.Text())
			default:
				t.Fatalf("unknown kind %q", kind)
			}
			if *update {
				if err := os.WriteFile(f, []byte(head+"\n---\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("usage of %s:\n got: %s\nwant: %s", f, got, want)
			}
		})
	}
}

// TestUsageReadAlike: the non-streamed answers of OpenAI's chat, its
// Responses API and Anthropic's Messages are read alike: the last usage
// member of the top level (the one encoding/json decodes), validated on
// its own, whatever else the body holds; none where it is not an object.
func TestUsageReadAlike(t *testing.T) {
	readers := map[string]struct {
		read  func([]byte) (budget.Usage, bool)
		usage func(in, out int) string
	}{
		"chat":      {upstream.UsageFromJSON, func(in, out int) string { return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d}`, in, out) }},
		"responses": {upstream.UsageFromResponsesJSON, func(in, out int) string { return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d}`, in, out) }},
		"messages":  {upstream.UsageFromAnthropicJSON, func(in, out int) string { return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d}`, in, out) }},
	}
	for name, r := range readers {
		for _, c := range []struct {
			body    string
			in, out int64
			ok      bool
		}{
			{`{"id":"a","usage":` + r.usage(1, 2) + `}`, 1, 2, true},
			{`{"usage":` + r.usage(1, 2) + `,"text":"\"usage\":` + strings.ReplaceAll(r.usage(9, 9), `"`, `\"`) + `","usage":` + r.usage(3, 4) + ` } `, 3, 4, true},
			{`{"content":[{"text":"}]"}],"usage":` + r.usage(5, 6) + `,"stop":null}`, 5, 6, true},
			{`{"content":[1,,],"usage":` + r.usage(7, 8) + `}`, 7, 8, true}, // the rest of the body is not validated
			{`{"usage":` + r.usage(1, 2) + `,"usage":null}`, 0, 0, false},
			{`{"usage":{"input_tokens":1,}}`, 0, 0, false},
			{`[{"usage":` + r.usage(1, 2) + `}]`, 0, 0, false},
		} {
			u, ok := r.read([]byte(c.body))
			if ok != c.ok || ok && (u.InputTokens != c.in || u.OutputTokens != c.out) {
				t.Errorf("%s: %s read as %+v %v, want %d in, %d out, %v", name, c.body, u, ok, c.in, c.out, c.ok)
			}
		}
	}
}

package upstream_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Golden files: testdata/usage/NAME.txt holds a kind line (openai-json,
// openai-sse, anthropic-json, anthropic-sse, responses-json, responses-sse,
// gemini-json), a recorded body, a "---" line
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
			case "openai-json", "anthropic-json", "responses-json", "gemini-json":
				w := map[string]convert.Wire{"openai-json": convert.OpenAI, "anthropic-json": convert.Anthropic, "responses-json": convert.Responses, "gemini-json": convert.Gemini}[kind]
				u, err := convert.AnswerUsage(w, []byte(body))
				got = fmt.Sprintf("%+v err=%v\n", u, err)
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
				got = fmt.Sprintf("%+v done=%v text=%q\n", m.Usage(), m.Done(), m.Text())
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
// member of the top level (the one encoding/json decodes), read on its own
// by the one usage reader, whatever else the body holds; none where it is
// not an object.
func TestUsageReadAlike(t *testing.T) {
	readers := map[string]struct {
		wire  convert.Wire
		usage func(in, out int) string
	}{
		"chat":      {convert.OpenAI, func(in, out int) string { return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d}`, in, out) }},
		"responses": {convert.Responses, func(in, out int) string { return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d}`, in, out) }},
		"messages":  {convert.Anthropic, func(in, out int) string { return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d}`, in, out) }},
	}
	for name, r := range readers {
		for _, c := range []struct {
			body    string
			in, out int64
			ok      bool
		}{
			{`{"id":"a","usage":` + r.usage(1, 2) + `}`, 1, 2, true},
			{`{"text":"\"usage\":` + strings.ReplaceAll(r.usage(9, 9), `"`, `\"`) + `","usage":` + r.usage(3, 4) + ` } `, 3, 4, true},
			{`{"content":[{"text":"}]"}],"usage":` + r.usage(5, 6) + `,"stop":null}`, 5, 6, true},
			{`{"usage":` + r.usage(1, 2) + `,"usage":` + r.usage(3, 4) + `}`, 3, 4, true}, // the last, as a Go client reads it
			{`{"content":[1,,],"usage":` + r.usage(7, 8) + `}`, 7, 8, true},               // the rest of the answer is not read
			{`{"usage":` + r.usage(1, 2) + `,"usage":null}`, 0, 0, false},
			{`{"usage":{"input_tokens":1,}}`, 0, 0, false},
			{`[{"usage":` + r.usage(1, 2) + `}]`, 0, 0, false},
			{`{"usage":null}`, 0, 0, false},
		} {
			u, err := convert.AnswerUsage(r.wire, []byte(c.body))
			if ok := err == nil && u.Reported(); ok != c.ok || ok && (u.Input != c.in || u.Output != c.out) {
				t.Errorf("%s: %s read as %+v %v, want %d in, %d out, %v", name, c.body, u, err, c.in, c.out, c.ok)
			}
		}
	}
}

package upstream_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

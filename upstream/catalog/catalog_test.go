package catalog_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

func TestTheEmbeddedCatalogue(t *testing.T) {
	all := catalog.All()
	if len(all) < 500 {
		t.Fatalf("%d models: the catalogue is not the generated one", len(all))
	}
	url, updated := catalog.Source()
	if !strings.Contains(url, "litellm") || len(updated) != len("2006-01-02") {
		t.Fatalf("source %q of %q", url, updated)
	}
	providers := map[string]bool{}
	for _, p := range catalog.Presets {
		providers[p.Provider] = true
	}
	for _, p := range []string{"azure", "anthropic", "gemini", "vertex", "bedrock"} {
		providers[p] = true
	}
	seen := map[string]bool{}
	for _, e := range all {
		key := e.Provider + "/" + e.Model
		switch {
		case seen[key]:
			t.Errorf("%s is listed twice", key)
		case !providers[e.Provider]:
			t.Errorf("%s: unknown provider", key)
		case e.Input < 0 || e.Output < 0 || e.CachedInput < 0 || e.CacheWrite < 0:
			t.Errorf("%s: a negative price", key)
		case e.Mode != "chat" && e.Mode != "responses" && e.Mode != "completion" && e.Mode != "embedding":
			t.Errorf("%s: mode %q", key, e.Mode)
		case e.Above != nil && e.Above.Above <= 0:
			t.Errorf("%s: a long-context tier without its threshold", key)
		}
		seen[key] = true
	}
	for _, want := range []struct {
		provider, model string
		input, output   int64
	}{
		{"openai", "gpt-4o", 2_500_000, 10_000_000},
		{"openai", "gpt-4o-mini", 150_000, 600_000},
		{"anthropic", "claude-sonnet-4-5", 3_000_000, 15_000_000},
		{"gemini", "gemini-2.5-pro", 1_250_000, 10_000_000},
		{"vertex", "gemini-2.5-pro", 1_250_000, 10_000_000},
		{"groq", "llama-3.3-70b-versatile", 590_000, 790_000},
	} {
		e, ok := catalog.Lookup(want.provider, want.model)
		if !ok || e.Input != want.input || e.Output != want.output {
			t.Errorf("%s/%s: %+v (found %v), want input %d output %d", want.provider, want.model, e, ok, want.input, want.output)
		}
	}
	if e, _ := catalog.Lookup("gemini", "gemini-2.5-pro"); e.Above == nil || e.Above.Above != 200_000 || e.Above.Input != 2_500_000 {
		t.Errorf("gemini-2.5-pro's long-context tier: %+v", e.Above)
	}
}

func TestEncoding(t *testing.T) {
	for _, tc := range []struct{ provider, model, want string }{
		{"openai", "gpt-4o-2024-08-06", "o200k_base"},
		{"openai", "o3-mini", "o200k_base"},
		{"azure", "gpt-4.1", "o200k_base"},
		{"openai", "gpt-4-turbo", "cl100k_base"},
		{"openai", "text-embedding-3-small", "cl100k_base"},
		{"anthropic", "claude-sonnet-4-5", ""},
		{"groq", "gpt-4o", ""}, // a name is not a tokenizer: another provider's model is counted × its ratio
	} {
		if got := catalog.Encoding(tc.provider, tc.model); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.provider, tc.model, got, tc.want)
		}
	}
}

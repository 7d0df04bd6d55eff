package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// A served model takes the catalogue's price at its upstream's provider
// unless the config sets one; a set field overrides that field only.
func TestModelsResolveFromTheCatalogue(t *testing.T) {
	src := `
upstreams:
  - {name: openai, base_url: "https://api.openai.com/v1", models: [gpt-4o, gpt-4o-mini, text-embedding-3-small], fallbacks: [backup]}
  - {name: backup, kind: azure, api_version: 2024-10-21, base_url: "https://x.openai.azure.com", models: [gpt-4o]}
  - {name: groq, preset: groq, models: [llama-3.3-70b-versatile]}
  - {name: claude, kind: anthropic, base_url: "https://api.anthropic.com/v1", models: [claude-sonnet-4-5]}
  - {name: local, preset: vllm, base_url: "http://127.0.0.1:8000/v1", models: [my-llama]}
models:
  gpt-4o-mini: {input: "$0.10"}
  my-llama: {input: 0, output: 0, max_output_tokens: 4096, token_ratio: 1.35}
`
	c, err := config.Parse([]byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model         string
		input, output budget.Money
		encoding      string
		ratio         float64 // 0: counted in bytes
		priced        string
		maxOut        int64
	}{
		{"gpt-4o", 2_500_000, 10_000_000, "o200k_base", 1, "catalogue (openai", 16384},
		{"gpt-4o-mini", 100_000, 600_000, "o200k_base", 1, "config + catalogue", 16384},
		{"llama-3.3-70b-versatile", 590_000, 790_000, "o200k_base", 0, "catalogue (groq", 32768},
		{"claude-sonnet-4-5", 3_000_000, 15_000_000, "o200k_base", 0, "catalogue (anthropic", 64000},
		{"my-llama", 0, 0, "o200k_base", 1.35, "config", 4096},
	} {
		m, ok := c.Models[tc.model]
		p := m.Price()
		if !ok || p.Input != tc.input || p.Output != tc.output || m.Encoding != tc.encoding || m.TokenRatio != tc.ratio || m.CountsBytes() != (tc.ratio == 0) ||
			!strings.HasPrefix(m.Priced, tc.priced) || m.MaxOutputTokens != tc.maxOut {
			t.Errorf("%s: %+v (price %+v)", tc.model, m, p)
		}
	}
	if m := c.Models["text-embedding-3-small"]; !m.Embedding || m.Price().Input != 20_000 {
		t.Errorf("an embedding model from the catalogue: %+v", m)
	}
	if p := c.Models["claude-sonnet-4-5"].Price(); p.Above == nil || p.Above.Tokens != 200_000 || p.Above.Input != 6_000_000 {
		t.Errorf("claude-sonnet-4-5's long-context tier: %+v", p.Above)
	}
	if u := c.Upstreams[2]; u.BaseURL != "https://api.groq.com/openai/v1" || u.CatalogProvider() != "groq" {
		t.Errorf("the groq preset: %s at %s", u.CatalogProvider(), u.BaseURL)
	}
	// A fallback at another provider charges that provider's list price.
	azure := c.Upstreams[1]
	if p := c.PriceAt(azure, "gpt-4o"); p.Input != 2_500_000 {
		t.Errorf("gpt-4o at azure: %+v", p)
	}
}

func TestAPresetNeedsKindOpenAI(t *testing.T) {
	_, err := config.Parse([]byte(`
upstreams:
  - {name: a, kind: anthropic, preset: groq, base_url: "https://api.anthropic.com/v1", models: [claude-sonnet-4-5]}
  - {name: b, preset: nope, base_url: "https://x.test/v1", models: [gpt-4o]}
`), noEnv)
	if err == nil || !strings.Contains(err.Error(), `upstreams.0.preset: unknown preset "groq" for kind anthropic`) ||
		!strings.Contains(err.Error(), `upstreams.1.preset: unknown preset "nope"`) {
		t.Fatalf("err = %v", err)
	}
}

// Gemini, Vertex and Bedrock take their prices from the catalogue under
// their own provider, have default addresses, and name what they lack.
func TestCloudUpstreams(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(creds, []byte(`{"type":"service_account"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `
upstreams:
  - {name: g, kind: gemini, api_key: k, models: [gemini-2.5-flash]}
  - {name: v, kind: vertex, project: p, location: us-east5, credentials_file: "` + creds + `", models: [claude-sonnet-4-5@20250929]}
  - {name: b, kind: bedrock, region: us-east-1, access_key_id: AKIA, secret_access_key: s, models: ["anthropic.claude-sonnet-4-5-20250929-v1:0"]}
`
	c, err := config.Parse([]byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for model, priced := range map[string]string{
		"gemini-2.5-flash":                          "catalogue (gemini",
		"claude-sonnet-4-5@20250929":                "catalogue (vertex",
		"anthropic.claude-sonnet-4-5-20250929-v1:0": "catalogue (bedrock",
	} {
		if m := c.Models[model]; !strings.HasPrefix(m.Priced, priced) || m.Price().Input <= 0 || m.Price().Output <= 0 {
			t.Errorf("%s: %+v", model, m)
		}
	}

	_, err = config.Parse([]byte(`
upstreams:
  - {name: v, kind: vertex, models: [gemini-2.5-flash]}
  - {name: b, kind: bedrock, models: ["anthropic.claude-sonnet-4-5-20250929-v1:0"]}
`), noEnv)
	for _, want := range []string{
		"upstreams.0: a vertex upstream needs its project and location",
		"upstreams.0.credentials_file: a vertex upstream needs a service account's JSON key file",
		"upstreams.1.region: a bedrock upstream needs its region",
		"upstreams.1: a bedrock upstream needs access_key_id and secret_access_key",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

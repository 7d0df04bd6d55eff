package config_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/config"
)

// A base_url without its API's version segment is valid but answers 404
// on every request: check-config warns, naming the upstream; a versioned
// one, a preset's own address, and kinds whose address is otherwise
// built are not warned about.
func TestABaseURLWithoutItsVersionIsWarnedAbout(t *testing.T) {
	c, err := config.Parse([]byte(`
upstreams:
  - {name: a, kind: anthropic, base_url: "https://api.anthropic.com", api_key: k, models: [claude-sonnet-4-5]}
  - {name: b, kind: anthropic, base_url: "https://api.anthropic.com/v1/", api_key: k, models: [claude-haiku-4-5]}
  - {name: o, base_url: "https://proxy.internal/openai", api_key: k, models: [gpt-4o]}
  - {name: g, kind: gemini, base_url: "https://generativelanguage.googleapis.com/v1beta", api_key: k, models: [gemini-2.5-flash]}
  - {name: r, preset: openrouter, api_key: k, models: [anthropic/claude-3-haiku]}
  - {name: x, kind: azure, api_version: 2024-10-21, base_url: "https://x.openai.azure.com", api_key: k, models: [gpt-4o-mini]}
orgs: [{id: acme, teams: [{id: ml}]}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) != 2 || !strings.HasPrefix(w[0], "upstreams[0].base_url") || !strings.Contains(w[0], "https://api.anthropic.com/v1") ||
		!strings.HasPrefix(w[1], "upstreams[2].base_url") {
		t.Fatalf("warnings: %q", w)
	}
}

package demo_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/demo"
)

func TestDemoConfigServesOpenAINamesAtListPrices(t *testing.T) {
	c, err := demo.Config("http://127.0.0.1:1/v1", "sha256:"+strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][3]int64{
		"gpt-4o":                 {2_500_000, 1_250_000, 10_000_000},
		"gpt-4o-mini":            {150_000, 75_000, 600_000},
		"text-embedding-3-small": {20_000, 0, 0},
	} {
		m, ok := c.Models[name]
		if !ok {
			t.Fatalf("demo lacks %s", name)
		}
		if got := [3]int64{m.Input.Value, m.CachedInput.Value, m.Output.Value}; got != want {
			t.Errorf("%s prices %v, want %v", name, got, want)
		}
	}
	// Claude and Gemini at the catalogue's list prices, behind the same
	// simulated server; the alias over two providers.
	for _, name := range []string{"claude-sonnet-4-5", "gemini-2.5-flash"} {
		if m := c.Models[name]; !strings.HasPrefix(m.Priced, "catalogue") || m.Input.Value <= 0 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if a, ok := c.Aliases["smart"]; !ok || len(a.Deployments) != 2 {
		t.Errorf("the smart alias: %+v", a)
	}
	opts := demo.UpstreamOptions(c)
	if len(opts.Models) != 8 || opts.Encodings["gpt-3.5-turbo"] != "cl100k_base" || opts.Encodings["claude-sonnet-4-5"] != "o200k_base" {
		t.Fatalf("upstream options %+v", opts)
	}
}

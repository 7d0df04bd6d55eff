package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/config"
)

func noEnv(string) (string, bool) { return "", false }

// Each file under testdata/invalid is one broken config; its "# want:" lines
// are fragments the error must contain, line numbers included.
func TestInvalidConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("fixture has no # want: line")
			}
			_, err = config.Parse(data, noEnv)
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	data, err := os.ReadFile("../examples/tollgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(data, func(k string) (string, bool) { return "sk-test-" + k, true })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Upstreams[0].APIKey; got != "sk-test-OPENAI_API_KEY" {
		t.Errorf("api_key = %q, want the expanded environment variable", got)
	}
	m := c.Models["gpt-4o"]
	if m.Input.Value != 2_500_000 || m.CachedInput.Value != 1_250_000 || m.Output.Value != 10_000_000 {
		t.Errorf("gpt-4o prices = %+v", m)
	}
	if m.DefaultOutputTokens != 4096 {
		t.Errorf("default output cap = %d, want 4096", m.DefaultOutputTokens)
	}
	if c.Models["gpt-4o-mini"].CachedInput.Value != 75_000 {
		t.Errorf("$0.075 parsed as %d µ$", c.Models["gpt-4o-mini"].CachedInput.Value)
	}
	// No image is free: each family gets its provider's largest figure.
	for name, want := range map[string][2]int64{"gpt-4o": {1445, 85}, "gpt-4o-mini": {48169, 2833}, "gpt-4.1-mini": {2489, 0}, "o4-mini": {2642, 0}} {
		if m := c.Models[name]; m.ImageTokens != want[0] || m.ImageTokensLow != want[1] {
			t.Errorf("%s: image_tokens %d, low %d; want %v", name, m.ImageTokens, m.ImageTokensLow, want)
		}
	}
	if c.Lease != config.DefaultLease || c.Store.SnapshotInterval != 30*time.Second {
		t.Errorf("defaults not applied: lease %v snapshot %v", c.Lease, c.Store.SnapshotInterval)
	}
	if w := c.Plans["standard"][0].Window; w != time.Minute {
		t.Errorf("rate window = %v", w)
	}
}

func TestEnvValuesCannotChangeStructure(t *testing.T) {
	src := "upstreams:\n  - name: openai\n    base_url: https://api.openai.com/v1\n    api_key: ${K}\n    models: [m]\nmodels:\n  m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}\n"
	evil := "x\nlisten: \":1\""
	c, err := config.Parse([]byte(src), func(string) (string, bool) { return evil, true })
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstreams[0].APIKey != evil || c.Listen != config.DefaultListen {
		t.Fatalf("the variable's value leaked into the structure: %+v", c)
	}
}

func TestParseUSD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"$1200", 1_200_000_000}, {"$1,200.50", 1_200_500_000}, {"1200.50 USD", 1_200_500_000},
		{"1200.50", 1_200_500_000}, {"1200 usd", 1_200_000_000}, {"0.000001", 1},
		{"1200000000 µ$", 1_200_000_000}, {"5 micros", 5}, {" $3.25 ", 3_250_000},
	} {
		if got, err := config.ParseUSD(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"1200", "200", "-5", "$-1", "1.2345678", "abc", "", "$"} {
		if got, err := config.ParseUSD(bad); err == nil {
			t.Errorf("ParseUSD(%q) = %d, want an error", bad, got)
		}
	}
	if _, err := config.ParseUSD("200"); err == nil || !strings.Contains(err.Error(), `"$200"`) || !strings.Contains(err.Error(), "µ$") {
		t.Errorf("the bare integer's error does not say how to fix it: %v", err)
	}
}

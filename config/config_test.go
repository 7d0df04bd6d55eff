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

// In the config too, an amount of dollars is written as money — "$1,200.50",
// "1200.50 USD", "1200.50" — or as micro-dollars spelled so ("1200 µ$");
// a bare non-zero integer is refused with the fix, and money is refused
// where a count is meant.
func TestConfigAmounts(t *testing.T) {
	t.Parallel()
	src := func(amount, price string) []byte {
		return []byte(`
upstreams:
  - {name: u, base_url: "https://x.test/v1", models: [my-model]}
models:
  my-model: {input: ` + price + `, output: "$2", max_output_tokens: 100}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: ` + amount + `, period: month}]
`)
	}
	for _, tc := range []struct {
		amount, price string
		want          int64
	}{
		{`"$1,200.50"`, `"$1"`, 1_200_500_000}, {`"1200.50 USD"`, `"$1"`, 1_200_500_000}, {`1200.50`, `"$1"`, 1_200_500_000},
		{`"1200 µ$"`, `"1000000 µ$"`, 1200}, {`"$1200"`, `0`, 1_200_000_000},
	} {
		c, err := config.Parse(src(tc.amount, tc.price), noEnv)
		if err != nil {
			t.Errorf("amount %s, price %s: %v", tc.amount, tc.price, err)
			continue
		}
		if got := c.Orgs[0].Teams[0].Limits[0].Amount.Value; got != tc.want {
			t.Errorf("amount %s = %d µ$, want %d", tc.amount, got, tc.want)
		}
	}
	for _, tc := range []struct{ amount, price, want string }{
		{`1200`, `"$1"`, `orgs.0.teams.0.limits.0.amount: 1200 is a bare number: write "$1200" for dollars or "1200 µ$" for micro-dollars`},
		{`"$1200"`, `3`, `models.my-model.input: 3 is a bare number`},
		{`"1200"`, `"$1"`, `1200 is a bare number`},
		{`"12 hundred"`, `"$1"`, `"12 hundred" is ambiguous`},
	} {
		if _, err := config.Parse(src(tc.amount, tc.price), noEnv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("amount %s, price %s: err = %v, want %q", tc.amount, tc.price, err, tc.want)
		}
	}
	_, err := config.Parse([]byte(`
upstreams: [{name: u, base_url: "https://x.test/v1", models: [gpt-4o]}]
orgs: [{id: acme, teams: [{id: ml, limits: [{name: tpm, kind: rate, unit: tokens, amount: "1000 µ$", window: 1m}]}]}]
`), noEnv)
	if err == nil || !strings.Contains(err.Error(), "a dollar amount needs unit usd") {
		t.Errorf("micro-dollars on a token limit: %v", err)
	}
}

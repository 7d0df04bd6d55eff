package config

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Money is an integer amount: micro-dollars for prices and "usd" limits, a
// plain count for token and request limits. In YAML it is an integer, or
// money as people write it — "$2.50", "2.50 USD", "2.50" — or
// micro-dollars spelled as such ("2500000 µ$"), parsed exactly (no
// floats). Validation refuses a bare non-zero integer where dollars are
// meant (a person means dollars by it, the config micro-dollars), and
// dollars where a count is.
type Money struct {
	Value int64
	// Dollars records that the YAML value was written as dollars.
	Dollars bool
	// Micros records that it was written as micro-dollars ("… µ$").
	Micros bool
	// Set records that the YAML gave a value (0 included): a price set to
	// zero is free, one left out comes from the catalogue.
	Set bool
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *Money) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want an integer or an amount like \"$2.50\"", n.Line)
	}
	if v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64); err == nil {
		*m = Money{Value: v, Set: true}
		return nil
	}
	v, micros, err := parseAmount(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*m = Money{Value: v, Dollars: !micros, Micros: micros, Set: true}
	return nil
}

// USD reports what is wrong with m as an amount of dollars, or "": a bare
// non-zero integer is ambiguous.
func (m Money) USD() string {
	if m.Value == 0 || m.Dollars || m.Micros {
		return ""
	}
	return fmt.Sprintf("%d is a bare number: write \"$%d\" for dollars or \"%d µ$\" for micro-dollars", m.Value, m.Value, m.Value)
}

// parseDollars parses "12.345678" into micro-dollars exactly.
func parseDollars(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || strings.HasPrefix(whole, "-") || strings.HasPrefix(whole, "+") {
		return 0, fmt.Errorf("want dollars with at most 6 decimals")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<63-1)/1_000_000-1 {
		return 0, fmt.Errorf("want dollars with at most 6 decimals")
	}
	var f int64
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("want dollars with at most 6 decimals")
		}
	}
	return w*1_000_000 + f, nil
}

// ParseUSD reads an amount of money as a person writes it — "$1,200.50",
// "1200.50 USD", "1200.50", "$1200" — or micro-dollars spelled as such
// ("1200000000 µ$", "1200000000 micros"), exactly, into micro-dollars. A
// bare integer is refused: a person means dollars by it, the config means
// micro-dollars, and a shell that ate "$1" of "$1200" leaves "200".
func ParseUSD(s string) (int64, error) {
	v, _, err := parseAmount(s)
	return v, err
}

// parseAmount is ParseUSD, saying whether the amount was written in
// micro-dollars.
func parseAmount(s string) (v int64, micros bool, err error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	for _, unit := range []string{"usd_micros", "micro-dollars", "microdollars", "micros", "µ$", "μ$"} {
		if num, ok := strings.CutSuffix(lower, unit); ok {
			v, err := strconv.ParseInt(strings.NewReplacer(",", "", "_", "", " ", "").Replace(num), 10, 64)
			if err != nil || v < 0 {
				return 0, true, fmt.Errorf("%q: want a whole number of micro-dollars", s)
			}
			return v, true, nil
		}
	}
	dollars := false
	if rest, ok := strings.CutPrefix(t, "$"); ok {
		t, dollars = rest, true
	}
	if num, ok := strings.CutSuffix(strings.ToLower(t), "usd"); ok {
		t, dollars = strings.TrimSpace(num), true
	}
	t = strings.NewReplacer(",", "", "_", "").Replace(t)
	if !dollars && !strings.Contains(t, ".") {
		return 0, false, fmt.Errorf("%q is ambiguous: write \"$%s\" (or %s USD) for dollars, or \"%s µ$\" for micro-dollars", s, t, t, t)
	}
	v, err = parseDollars(t)
	if err != nil {
		return 0, false, fmt.Errorf("%q: %w", s, err)
	}
	return v, false, nil
}

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// modelRow is one model as `tollgate models` shows it: prices in dollars
// per million tokens (µ$ in JSON).
type modelRow struct {
	Model           string `json:"model"`
	Upstream        string `json:"upstream,omitempty"`
	Provider        string `json:"provider"`
	Mode            string `json:"mode,omitempty"`
	Input           int64  `json:"input_usd_micros_per_1m"`
	CachedInput     int64  `json:"cached_input_usd_micros_per_1m"`
	CacheWrite      int64  `json:"cache_write_usd_micros_per_1m"`
	CacheWrite1h    int64  `json:"cache_write_1h_usd_micros_per_1m,omitempty"`
	Output          int64  `json:"output_usd_micros_per_1m"`
	Above           int64  `json:"long_context_above_tokens,omitempty"`
	MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
	Counted         string `json:"counted_as,omitempty"`
	Priced          string `json:"priced_by"`
}

// models prints the models a config puts in force — each served model at
// each upstream, with the price that applies there and where it comes
// from — or, with --catalog, the built-in price catalogue.
func models(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	path := fs.String("config", "", "config file: the models in force")
	all := fs.Bool("catalog", false, "the whole built-in price catalogue instead")
	provider := fs.String("provider", "", "with --catalog: one provider's models only")
	format := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var rows []modelRow
	switch {
	case *all:
		for _, e := range catalog.All() {
			if *provider == "" || e.Provider == *provider {
				rows = append(rows, catalogRow(e))
			}
		}
	case *path != "":
		cfg, err := config.Load(*path)
		if err != nil {
			return err
		}
		rows = inForce(cfg)
	default:
		return fmt.Errorf("want --config FILE (the models in force) or --catalog")
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if *format != "table" {
		return fmt.Errorf("unknown format %q (want table or json)", *format)
	}
	url, updated := catalog.Source()
	fmt.Fprintf(stdout, "Prices in dollars per million tokens. Catalogue: %s, %s.\n\n", url, updated)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tUPSTREAM\tPROVIDER\tINPUT\tCACHED\tCACHE WRITE\tCACHE WRITE 1H\tOUTPUT\tLONG CONTEXT\tMAX OUTPUT\tCOUNTED AS\tPRICED BY")
	for _, r := range rows {
		long := ""
		if r.Above > 0 {
			long = "> " + strconv.FormatInt(r.Above, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Model, r.Upstream, r.Provider,
			usd(r.Input), usd(r.CachedInput), usd(r.CacheWrite), usd(r.CacheWrite1h), usd(r.Output), long, count(r.MaxOutputTokens), r.Counted, r.Priced)
	}
	return tw.Flush()
}

// inForce lists every model each upstream serves, at its price there.
func inForce(cfg *config.Config) []modelRow {
	var rows []modelRow
	for _, u := range cfg.Upstreams {
		for _, name := range u.Models {
			m := cfg.Models[name]
			p := cfg.PriceAt(u, name)
			r := modelRow{Model: name, Upstream: u.Name, Provider: u.CatalogProvider(), Input: int64(p.Input), CachedInput: int64(p.CachedInput),
				CacheWrite: int64(p.CacheWrite), CacheWrite1h: int64(p.CacheWrite1h), Output: int64(p.Output), MaxOutputTokens: m.MaxOutputTokens, Priced: m.Priced,
				Counted: m.Encoding}
			switch {
			case m.CountsBytes():
				r.Counted = "UTF-8 bytes"
			case m.Foreign:
				r.Counted = fmt.Sprintf("%s × %g", m.Encoding, m.TokenRatio)
			}
			if _, own := u.Prices[name]; own {
				r.Priced = "upstream " + u.Name + "'s prices"
			}
			if p.Above != nil {
				r.Above = p.Above.Tokens
			}
			if m.Embedding {
				r.Mode = "embedding"
			}
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b modelRow) int {
		if a.Model != b.Model {
			return map[bool]int{true: -1, false: 1}[a.Model < b.Model]
		}
		return 0
	})
	return rows
}

func catalogRow(e catalog.Entry) modelRow {
	r := modelRow{Model: e.Model, Provider: e.Provider, Mode: e.Mode, Input: e.Input, CachedInput: e.CachedInput, CacheWrite: e.CacheWrite,
		CacheWrite1h: e.CacheWrite1h, Output: e.Output, MaxOutputTokens: e.MaxOutputTokens, Priced: "catalogue", Counted: catalog.Encoding(e.Provider, e.Model)}
	if e.Above != nil {
		r.Above = e.Above.Above
	}
	return r
}

func usd(micros int64) string {
	if micros == 0 {
		return "-"
	}
	return budget.Money(micros).Dollars()
}

func count(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

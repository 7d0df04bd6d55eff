package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"text/tabwriter"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
)

func ledgerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if isHelp(args) {
		return &helpShown{text: "usage: tollgate " + synopses["ledger reseed"] + "\n"}
	}
	if len(args) == 0 || args[0] != "reseed" {
		return misuse("ledger", "want a subcommand: reseed")
	}
	fs := flag.NewFlagSet("ledger reseed", flag.ContinueOnError)
	path := fs.String("config", "tollgate.yaml", "config file of the gateway whose store lost its counters")
	dryRun := fs.Bool("dry-run", false, "show what would change; change nothing")
	format := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return misuse("ledger reseed", "unknown format %q (want table or json)", *format)
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	rep, rerr := a.Reseed(ctx, *dryRun)
	if err := errors.Join(rerr, a.Close()); err != nil {
		return err
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BUDGET\tPERIOD\tUNIT\tLEDGER\tSTORE WAS\tSTORE NOW")
	for _, b := range rep.Budgets {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\n", b.Bucket, b.Period, b.Unit, b.Ledger, b.Was, b.Now)
	}
	w.Flush()
	verb := "raised"
	if *dryRun {
		verb = "would raise (dry run)"
	}
	n := 0
	for _, b := range rep.Budgets {
		if b.Ledger > b.Was {
			n++
		}
	}
	fmt.Fprintf(stdout, "%d ledger entries (%d still in Redis streams); %s %d of %d budgets\n", rep.Entries, rep.FromStream, verb, n, len(rep.Budgets))
	skipped := make([]string, 0, len(rep.Skipped))
	for s := range rep.Skipped {
		skipped = append(skipped, s)
	}
	sort.Strings(skipped)
	for _, s := range skipped {
		fmt.Fprintf(stdout, "not rebuilt: %s (%d entries)\n", s, rep.Skipped[s])
	}
	return nil
}

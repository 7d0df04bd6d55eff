package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Conventions every command keeps, as Go's own tools do: -h and --help
// print the command's usage on stdout and exit 0; a usage mistake (an
// unknown flag, a missing or extra argument) is one line on stderr with a
// hint, and exit 2; a failure of the work itself is exit 1.

// helpShown is returned when -h printed a command's usage: exit 0.
type helpShown struct{ text string }

func (h *helpShown) Error() string { return "help requested" }

// usageError is a command used wrongly: exit 2.
type usageError struct{ cmd, msg string }

func (e *usageError) Error() string { return e.msg }

func misuse(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// synopses are the commands' usage lines, by flag set name.
var synopses = map[string]string{
	"serve":                "serve --config FILE [--log-format json|text]",
	"check-config":         "check-config --config FILE (or: check-config FILE)",
	"keys new":             "keys new",
	"keys create":          "keys create --org O --team T --id ID [--models a,b] [--plan P]",
	"keys list":            "keys list [--org O] [--team T]",
	"keys revoke":          "keys revoke --org O --id ID",
	"models":               "models --config FILE | --catalog [--provider P] [--format table|json]",
	"demo":                 "demo [--listen ADDR] [--data DIR] [--latency D] [--chunk-delay D]",
	"mock-upstream":        "mock-upstream --listen ADDR [--reply-tokens N] [--latency D] [--chunk-delay D] [--api-key K] [--no-provider-headers]",
	"report":               "report --month 2026-11 --by team,model [--format table|csv|json]",
	"statement":            "statement --org O [--team T] --month 2026-11 [--format csv|html|json]",
	"ceiling set":          "ceiling set --org O [--team T|--key K] --name BUDGET --amount '$1200'|reset [--for 72h|--until T] [--yes]",
	"ceiling show":         "ceiling show --org O [--team T|--key K]",
	"ceiling reset-period": "ceiling reset-period --org O [--team T|--key K] --name BUDGET",
	"ledger reseed":        "ledger reseed --config FILE [--dry-run] [--format table|json]",
	"version":              "version",
}

// parseFlags parses args into fs, with no positional arguments after the
// flags: a mistake is a usageError, -h a helpShown with the command's
// usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseArgs(fs, args, 0)
}

// parseArgs is parseFlags allowing up to positional arguments.
func parseArgs(fs *flag.FlagSet, args []string, positional int) error {
	synopsis := synopses[fs.Name()]
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		var b bytes.Buffer
		fmt.Fprintf(&b, "usage: tollgate %s\n", synopsis)
		fs.SetOutput(&b)
		if hasFlags(fs) {
			b.WriteString("\nflags:\n")
			fs.PrintDefaults()
		}
		return &helpShown{text: b.String()}
	case err != nil:
		return misuse(fs.Name(), "%v", err)
	case fs.NArg() > positional:
		return misuse(fs.Name(), "unexpected argument %q", fs.Arg(positional))
	}
	return nil
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// isHelp reports whether args ask a command group for its usage.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

// exitCode writes err for the user and returns the command's exit code.
func exitCode(cmd string, err error, stdout, stderr io.Writer) int {
	var help *helpShown
	var use *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.text)
		return 0
	case errors.As(err, &use):
		name := strings.TrimSpace(use.cmd)
		if name == "" {
			name = cmd
		}
		fmt.Fprintf(stderr, "tollgate %s: %s\nRun 'tollgate %s -h' for usage.\n", name, use.msg, name)
		return 2
	}
	fmt.Fprintf(stderr, "tollgate %s: %v\n", cmd, err)
	return 1
}

// release is the version a release build stamps in (-X main.release=…).
var release string

// version prints the module version, the commit and the Go version the
// binary was built from.
func version(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("this binary carries no build information")
	}
	v, commit, when, dirty := info.Main.Version, "unknown", "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			when = " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	if release != "" {
		v = release
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(stdout, "tollgate %s\ncommit %s%s%s\n%s %s/%s\n", v, commit, when, dirty, info.GoVersion, goos(info), goarch(info))
	return nil
}

func goos(info *debug.BuildInfo) string   { return setting(info, "GOOS") }
func goarch(info *debug.BuildInfo) string { return setting(info, "GOARCH") }

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return "?"
}

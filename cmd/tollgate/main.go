// Command tollgate is the gateway's command line: serve, check-config, keys,
// demo, mock-upstream, the admin API's report and ceiling, and ledger
// reseed. It parses flags and wires; the work is elsewhere.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/demo"
	"github.com/tollgate-dev/tollgate/internal/jsonlog"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const usage = `tollgate: hard cost budgets in front of paid LLM APIs

Usage:
  tollgate serve --config FILE          run the gateway
  tollgate check-config --config FILE   validate a config file (exit 1 on errors; FILE alone works too)
  tollgate keys new                     make an API key and the hash for the config
  tollgate keys create --org O --team T --id ID [--models a,b] [--plan P]
                                        make a key on a running gateway (admin API; shown once)
  tollgate keys list [--org O] [--team T]
  tollgate keys revoke --org O --id ID  revoke a key made with keys create
  tollgate models --config FILE | --catalog [--provider P] [--format table|json]
                                        the models in force, their prices and where they come
                                        from; or the built-in price catalogue
  tollgate demo [--listen ADDR]         the gateway in front of a simulated OpenAI
  tollgate mock-upstream --listen ADDR  the simulated OpenAI-compatible upstream alone
  tollgate report --month 2026-11 --by team,model --format table|csv|json
                                        a spend report from a gateway's admin API
  tollgate ceiling set --org O [--team T|--key K] --name BUDGET --amount '$1200'|reset [--for 72h|--until T] [--yes]
                                        change a budget at run time (audited); a cut below this
                                        period's spend or by more than half needs --yes
  tollgate ceiling show --org O [--team T|--key K]
                                        a team's budgets: configured, in force, remaining
  tollgate ceiling reset-period --org O --team T --name BUDGET
                                        start the current period over at zero spend (audited)
  tollgate statement --org O --team T --month 2026-11 [--format csv|html|json]
                                        a team's monthly statement (csv by default)
  tollgate ledger reseed --config FILE [--dry-run]
                                        rebuild this period's budget counters from the ledger
                                        (after Redis lost its data); never lowers a counter
  tollgate version                      the version, commit and Go version of this binary

Every command takes -h. The admin commands read --url and --token, or
TOLLGATE_URL and TOLLGATE_ADMIN_TOKEN. Exit status: 0 done, 1 failed, 2 used wrongly.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "check-config":
		err = checkConfig(args[1:], stdout)
	case "keys":
		err = keys(args[1:], stdout)
	case "models":
		err = models(args[1:], stdout)
	case "demo":
		err = runDemo(ctx, args[1:], stdout, stderr)
	case "mock-upstream":
		err = mockUpstream(ctx, args[1:], stdout, stderr)
	case "report":
		err = report(args[1:], stdout)
	case "statement":
		err = statement(args[1:], stdout)
	case "ceiling":
		err = ceiling(args[1:], stdout)
	case "ledger":
		err = ledgerCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		err = version(args[1:], stdout)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate: unknown command %q\nRun 'tollgate -h' for usage.\n", args[0])
		return 2
	}
	return exitCode(args[0], err, stdout, stderr)
}

func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "json":
		return slog.New(jsonlog.New(w)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("unknown log format %q (want json or text)", format)
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	path := fs.String("config", "tollgate.yaml", "config file")
	logFormat := fs.String("log-format", "json", "json or text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logFormat)
	if err != nil {
		return err
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	setGCPercent(cfg.Server.GCPercent, os.LookupEnv)
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	// SIGHUP reloads the config file; a bad file is logged and ignored.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = a.Reload(*path)
			}
		}
	}()
	return a.Serve(ctx, ln)
}

func checkConfig(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	path := fs.String("config", "", "config file")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	switch {
	case *path != "" && fs.NArg() == 1:
		return misuse("check-config", "give the file once: --config FILE or FILE")
	case fs.NArg() == 1:
		*path = fs.Arg(0)
	case *path == "":
		return misuse("check-config", "give the config file: --config FILE")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	keys := 0
	for _, o := range cfg.Orgs {
		for _, t := range o.Teams {
			keys += len(t.Keys)
		}
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "%s: warning: %s\n", *path, w)
	}
	fmt.Fprintf(stdout, "%s: ok (%d upstreams, %d models, %d orgs, %d keys)\n", *path, len(cfg.Upstreams), len(cfg.Models), len(cfg.Orgs), keys)
	return nil
}

func keys(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "create":
			return keysCreate(args[1:], stdout)
		case "list":
			return keysList(args[1:], stdout)
		case "revoke":
			return keysRevoke(args[1:], stdout)
		}
	}
	if len(args) == 0 || args[0] != "new" {
		return group("keys", args, "new", "create", "list", "revoke")
	}
	if err := parseFlags(flag.NewFlagSet("keys new", flag.ContinueOnError), args[1:]); err != nil {
		return err
	}
	key := policy.NewKey()
	fmt.Fprintf(stdout, "key:  %s\nhash: %s\n\nGive the key to its owner now; it is not stored. Put the hash in the config:\n  keys:\n    - id: <name>\n      hash: %s\n", key, policy.HashKey(key), policy.HashKey(key))
	return nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", envOr("TOLLGATE_LISTEN", "127.0.0.1:8080"), "gateway address (env TOLLGATE_LISTEN; the Docker image sets 0.0.0.0:8080)")
	upListen := fs.String("upstream-listen", "127.0.0.1:0", "simulated upstream address")
	latency := fs.Duration("latency", 0, "simulated time to first byte")
	chunkDelay := fs.Duration("chunk-delay", 20*time.Millisecond, "simulated delay between stream chunks")
	logFormat := fs.String("log-format", "text", "json or text")
	dataDir := fs.String("data", "", "keep the demo's ledger, audit trail and keys here (default: a temporary directory, removed at exit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logFormat)
	if err != nil {
		return err
	}
	d, err := demo.Start(ctx, demo.Options{Listen: *listen, UpstreamListen: *upListen, Latency: *latency, ChunkDelay: *chunkDelay, Dir: *dataDir, Log: log})
	if err != nil {
		return err
	}
	defer d.Close()
	base, key := d.Base, d.Key
	fmt.Fprintf(stdout, `Tollgate demo: gateway on %s, simulated OpenAI, Anthropic and Gemini upstreams on %s (no money is spent).
The demo team may spend $0.50 a day; watch it refuse once that is reserved.

TOLLGATE_API_KEY=%s

Try (any model in either format: gpt-4o, claude-sonnet-4-5, gemini-2.5-flash, or the alias smart):
  curl -s %s/v1/chat/completions -H "Authorization: Bearer %s" -H "Content-Type: application/json" -d '{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hello"}]}'

OpenAI SDKs:    export OPENAI_BASE_URL=%s/v1 OPENAI_API_KEY=%s
Anthropic SDKs: export ANTHROPIC_BASE_URL=%s ANTHROPIC_API_KEY=%s

Finance page, with four weeks of generated spend (open it in a browser; the link signs you in as the demo's admin):
  %s
`, base, d.Upstream, key, base, key, base, key, base, key, d.PageURL())
	return d.Serve(ctx)
}

func mockUpstream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mock-upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address")
	latency := fs.Duration("latency", 0, "time to first byte")
	chunkDelay := fs.Duration("chunk-delay", 0, "delay between stream chunks")
	apiKey := fs.String("api-key", "", "the only bearer token accepted (empty: any)")
	replyTokens := fs.Int64("reply-tokens", 0, "fixed reply length in tokens (0: 10 to 99, by request)")
	noHeaders := fs.Bool("no-provider-headers", false, "leave out the request ids, organisation and rate-limit headers the providers send")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := demo.Config("http://unused/v1", policy.HashKey("unused"))
	if err != nil {
		return err
	}
	opts := demo.UpstreamOptions(cfg)
	opts.APIKey, opts.Latency, opts.ChunkDelay, opts.NoProviderHeaders = *apiKey, *latency, *chunkDelay, *noHeaders
	if n := *replyTokens; n > 0 {
		opts.ReplyTokens = func(uint64) int64 { return n }
	}
	sim, err := simulated.New(opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "simulated OpenAI-compatible upstream on http://%s/v1\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// setGCPercent sets the collector's target from server.gc_percent, unless
// GOGC is set in the environment (the operator's word wins): applied says
// which.
func setGCPercent(percent int, lookupEnv func(string) (string, bool)) (applied bool) {
	if _, ok := lookupEnv("GOGC"); ok {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}

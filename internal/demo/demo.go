// Package demo holds the demo configuration: OpenAI's, Anthropic's and
// Gemini's model names and list prices in front of the simulated upstream.
package demo

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

//go:embed demo.yaml
var demoYAML []byte

// Config returns the demo configuration for a simulated upstream at
// upstreamURL (its API root, ending in /v1) and a key with keyHash.
func Config(upstreamURL, keyHash string) (*config.Config, error) {
	vars := map[string]string{"TOLLGATE_DEMO_UPSTREAM": upstreamURL, "TOLLGATE_DEMO_KEY_HASH": keyHash,
		"TOLLGATE_DEMO_GEMINI": strings.TrimSuffix(upstreamURL, "/v1") + "/v1beta"}
	return config.Parse(demoYAML, func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	})
}

// UpstreamOptions are the simulated upstream's settings matching Config: the
// same models, counted with the same encodings, behind the same key.
func UpstreamOptions(c *config.Config) simulated.Options {
	opts := simulated.Options{Encodings: map[string]string{}, APIKey: c.Upstreams[0].APIKey}
	for _, u := range c.Upstreams {
		for _, name := range u.Models {
			opts.Models = append(opts.Models, name)
			opts.Encodings[name] = c.Models[name].Encoding
		}
	}
	return opts
}

// Options are the demo's settings.
type Options struct {
	Listen, UpstreamListen string
	Latency, ChunkDelay    time.Duration
	// Dir keeps the ledger, audit trail and keys; empty: a temporary
	// directory, removed when the demo stops.
	Dir string
	Log *slog.Logger
	// Now is when the generated history ends (zero: the time it starts).
	Now time.Time
}

// Demo is a running demo: the gateway, its simulated upstreams, and the
// finance page with generated history.
type Demo struct {
	// Base is the gateway's address; Upstream the simulated server's.
	Base, Upstream string
	// Key is the demo team's API key; AdminToken signs in to the page.
	Key, AdminToken string
	Config          *config.Config
	App             *app.App
	ln              net.Listener
	stop            []func()
}

// PageURL is the finance page's address, signed in as the demo's admin.
func (d *Demo) PageURL() string { return d.Base + "/admin/?token=" + d.AdminToken }

// Start starts the simulated upstreams and builds the gateway in front of
// them, with four weeks of generated spend; Serve serves it.
func Start(ctx context.Context, o Options) (*Demo, error) {
	d := &Demo{Key: policy.NewKey(), AdminToken: policy.NewKey()}
	if err := d.start(ctx, o); err != nil {
		d.Close() // what was started before the error
		return nil, err
	}
	return d, nil
}

// start starts d's parts in turn, each one's stop added to d.stop as it
// starts: an error leaves d.Close to stop what had started.
func (d *Demo) start(ctx context.Context, o Options) error {
	upLn, err := net.Listen("tcp", o.UpstreamListen)
	if err != nil {
		return fmt.Errorf("demo: the simulated upstreams cannot listen on %s: %w", o.UpstreamListen, err)
	}
	d.Upstream = "http://" + upLn.Addr().String()
	if d.Config, err = Config(d.Upstream+"/v1", policy.HashKey(d.Key)); err != nil {
		upLn.Close()
		return err
	}
	opts := UpstreamOptions(d.Config)
	opts.Latency, opts.ChunkDelay = o.Latency, o.ChunkDelay
	sim, err := simulated.New(opts)
	if err != nil {
		upLn.Close()
		return err
	}
	upSrv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = upSrv.Serve(upLn) }()
	d.stop = append(d.stop, func() { _ = upSrv.Close() })

	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tollgate-demo-"); err != nil {
			return err
		}
		d.stop = append(d.stop, func() { _ = os.RemoveAll(dir) })
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	Finance(d.Config, dir, policy.HashKey(d.AdminToken), fmt.Sprintf("Demo: the spend before %s is generated demo data (%d days, three teams); what you send through the gateway is added to it. Files in %s.",
		now.UTC().Format("2006-01-02 15:04 MST"), HistoryDays, dir))
	if _, err := os.Stat(d.Config.LedgerPath); os.IsNotExist(err) {
		if _, err := History(ctx, d.Config, now); err != nil {
			return err
		}
	}
	if d.App, err = app.New(d.Config, o.Log); err != nil {
		return err
	}
	// The budgets start from the ledger: this month's demo spend counts.
	if _, err := d.App.Reseed(ctx, false); err != nil {
		_ = d.App.Close()
		return err
	}
	if d.ln, err = net.Listen("tcp", o.Listen); err != nil {
		_ = d.App.Close()
		return fmt.Errorf("demo: the gateway cannot listen on %s: %w", o.Listen, err)
	}
	d.Base = "http://" + browsable(d.ln.Addr())
	return nil
}

// Serve serves the gateway until ctx ends.
func (d *Demo) Serve(ctx context.Context) error { return d.App.Serve(ctx, d.ln) }

// Close stops the simulated upstreams and removes a temporary directory.
func (d *Demo) Close() {
	for i := len(d.stop) - 1; i >= 0; i-- {
		d.stop[i]()
	}
	d.stop = nil
}

// browsable is addr as a browser on this machine reaches it: a listener
// on every interface (0.0.0.0, ::) is reached on the loopback address.
func browsable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

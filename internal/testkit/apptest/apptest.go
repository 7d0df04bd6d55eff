// Package apptest starts whole gateways for tests: a config from YAML,
// the app it wires, served on a test server, all closed when the test
// ends. It is the one copy of that set-up for the e2e, app and CLI tests.
package apptest

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/app"
)

// Config parses src with vars as its environment (${VAR}); a bad config
// fails t.
func Config(t testing.TB, src string, vars map[string]string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(src), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// New builds the app of src; the caller closes it.
func New(t testing.TB, src string, vars map[string]string) *app.App {
	t.Helper()
	a, err := app.New(Config(t, src, vars), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Serve builds the app of src and serves it on a test server; both are
// closed when t ends. It returns the server's URL.
func Serve(t testing.TB, src string, vars map[string]string) (string, *app.App) {
	t.Helper()
	a := New(t, src, vars)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("closing the app: %v", err)
		}
	})
	return srv.URL, a
}

// Run serves a on a listener of its own, as `tollgate serve` does, and
// returns its address (host:port) and stop, which shuts it down as
// SIGTERM does and returns Serve's error. Stop runs when t ends if the
// test did not call it.
func Run(t testing.TB, a *app.App) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), stop
}

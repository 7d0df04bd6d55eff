// Package pgtest gives a test its own database on a real PostgreSQL server:
// the machine's (TOLLGATE_TEST_POSTGRES, default the local server as user
// postgres), with a fresh database per test, dropped at cleanup. It can
// also take the database away and give it back, for outage tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultServer is the server used when TOLLGATE_TEST_POSTGRES is unset.
const DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DB is one test's database.
type DB struct {
	// DSN connects to the database.
	DSN   string
	name  string
	admin string
	t     testing.TB
}

// New creates an empty database and drops it when the test ends. A server
// that does not answer fails the test: it is part of what is tested.
func New(t testing.TB) *DB {
	t.Helper()
	admin := os.Getenv("TOLLGATE_TEST_POSTGRES")
	if admin == "" {
		admin = DefaultServer
	}
	d := &DB{name: "tollgate_test_" + strings.ToLower(rand.Text()[:12]), admin: admin, t: t}
	d.exec("CREATE DATABASE " + d.name)
	t.Cleanup(func() { d.exec("DROP DATABASE IF EXISTS " + d.name + " WITH (FORCE)") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("TOLLGATE_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + d.name
	d.DSN = u.String()
	return d
}

// exec runs sql on the server's admin database.
func (d *DB) exec(sql string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		d.t.Fatalf("connecting to the test PostgreSQL (%s; set TOLLGATE_TEST_POSTGRES): %v", d.admin, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
}

// Block makes the database refuse every connection and closes those open:
// to its clients PostgreSQL is down.
func (d *DB) Block() {
	d.t.Helper()
	d.exec("ALTER DATABASE " + d.name + " WITH ALLOW_CONNECTIONS false")
	d.exec(fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'", d.name))
}

// Unblock lets clients connect again.
func (d *DB) Unblock() {
	d.t.Helper()
	d.exec("ALTER DATABASE " + d.name + " WITH ALLOW_CONNECTIONS true")
}

// Conn opens a connection to the database, closed at cleanup.
func (d *DB) Conn() *pgx.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.DSN)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

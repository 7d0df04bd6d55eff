// Package redistest starts real redis-server processes for tests: a single
// node on a free port, or a Redis Cluster of several masters. The binaries
// (redis-server, redis-cli) must be on PATH; .ci/run installs them.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs a redis-server on a free port of 127.0.0.1, stopped when the
// test ends. extra are more redis-server arguments.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (apt-get install redis-server)")
	}
	port := freePort(t)
	s := &Server{t: t, Addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir()}
	s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", ""}, extra...)
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Restart starts the server again (after Kill), on the same address.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v", s.Addr, err)
		}
	}
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Client returns a client of the server, closed when the test ends. Like
// the gateway's own, it honours context deadlines (go-redis ignores them
// unless told), so a frozen server cannot hold a call past its timeout.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs a cluster of n masters (at least 3) and waits until
// every slot is served.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed (apt-get install redis-tools)")
	}
	c := &Cluster{}
	addrs := make([]string, n)
	for i := range n {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, s)
		addrs[i] = s.Addr
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("creating the cluster: %v\n%s", err, out)
	}
	for _, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ready: %v %s", s.Addr, err, info)
			}
		}
		cl.Close()
	}
	return c
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// String names the cluster's nodes.
func (c *Cluster) String() string {
	parts := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		parts[i] = s.Addr
	}
	return fmt.Sprint(parts)
}

// Signal sends sig to the server: SIGSTOP freezes it (a partition that
// keeps its data), SIGCONT resumes it.
func (s *Server) Signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// quiet drops go-redis's own log lines (refused dials while a test has
// Redis down on purpose); the code under test reports failures itself.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

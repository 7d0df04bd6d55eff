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
	"syscall"
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

// StartReplica runs a redis-server that replicates master, and waits
// until it has the master's data.
func StartReplica(t testing.TB, master *Server, extra ...string) *Server {
	t.Helper()
	host, port, _ := strings.Cut(master.Addr, ":")
	r := Start(t, append([]string{"--replicaof", host, port}, extra...)...)
	r.WaitSynced(master)
	return r
}

// WaitSynced waits until s, a replica of master, has every write master
// made so far (up to 10 s).
func (s *Server) WaitSynced(master *Server) {
	s.t.Helper()
	m := redis.NewClient(&redis.Options{Addr: master.Addr, MaxRetries: -1})
	defer m.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := m.Wait(context.Background(), 1, 100).Result()
		if err == nil && n >= 1 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("replica %s did not catch up with %s: %v", s.Addr, master.Addr, err)
		}
	}
}

// Detach freezes replica, a replica of s, and cuts its link: from here on
// s acknowledges writes the replica never receives (what the kernel had
// already delivered to the replica's socket still reaches it), until the
// replica is resumed with SIGCONT and reconnects.
func (s *Server) Detach(replica *Server) {
	s.t.Helper()
	replica.Signal(syscall.SIGSTOP)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.ClientKillByFilter(context.Background(), "TYPE", "replica").Err(); err != nil {
		s.t.Fatalf("cutting %s's replicas: %v", s.Addr, err)
	}
}

// Promote makes a replica a master (REPLICAOF NO ONE), as Sentinel or an
// operator does after its master died.
func (s *Server) Promote() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.ReplicaOf(context.Background(), "NO", "ONE").Err(); err != nil {
		s.t.Fatalf("promoting %s: %v", s.Addr, err)
	}
}

// Cluster is a Redis Cluster: its masters, and a replica of each when it
// was started with them.
type Cluster struct {
	Nodes    []*Server
	Replicas []*Server
}

// StartCluster runs a cluster of n masters (at least 3) and waits until
// every slot is served.
func StartCluster(t testing.TB, n int) *Cluster { return startCluster(t, n, 0) }

// StartClusterWithReplicas runs a cluster of n masters (at least 3), each
// with one replica, and waits until every slot is served and every replica
// has its master's data.
func StartClusterWithReplicas(t testing.TB, n int) *Cluster { return startCluster(t, n, 1) }

func startCluster(t testing.TB, n, replicas int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed (apt-get install redis-tools)")
	}
	// With replicas, a node timeout long enough that a busy test machine
	// does not fail a master over by itself: the tests fail over on purpose.
	timeout := "2000"
	if replicas > 0 {
		timeout = "15000"
	}
	var all []*Server
	addrs := make([]string, n*(1+replicas))
	for i := range addrs {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", timeout)
		all = append(all, s)
		addrs[i] = s.Addr
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("creating the cluster: %v\n%s", err, out)
	}
	c := &Cluster{}
	for _, s := range all {
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
		role, err := cl.Do(context.Background(), "ROLE").Slice()
		cl.Close()
		if err != nil || len(role) == 0 {
			t.Fatalf("ROLE of %s: %v", s.Addr, err)
		}
		if role[0] == "master" {
			c.Nodes = append(c.Nodes, s)
		} else {
			c.Replicas = append(c.Replicas, s)
		}
	}
	for _, r := range c.Replicas {
		r.WaitSynced(c.masterOfReplica(r))
	}
	return c
}

// nodes parses CLUSTER NODES as one node sees it: address → id, and id →
// the master's id for a replica ("" for a master), and the master of slot
// (by id) if slot >= 0.
func (c *Cluster) nodes(from *Server, slot int64) (ids map[string]string, masterOf map[string]string, owner string) {
	c.Nodes[0].t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: from.Addr})
	defer cl.Close()
	text, err := cl.ClusterNodes(context.Background()).Result()
	if err != nil {
		c.Nodes[0].t.Fatalf("CLUSTER NODES: %v", err)
	}
	ids, masterOf = map[string]string{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		ids[addr] = f[0]
		if f[3] != "-" {
			masterOf[f[0]] = f[3]
		}
		for _, r := range f[8:] {
			lo, hi, ranged := strings.Cut(r, "-")
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b := a
			var err2 error
			if ranged {
				b, err2 = strconv.ParseInt(hi, 10, 64)
			}
			if err1 == nil && err2 == nil && slot >= a && slot <= b {
				owner = f[0]
			}
		}
	}
	return ids, masterOf, owner
}

func (c *Cluster) byID(ids map[string]string, id string) *Server {
	for _, s := range append(append([]*Server{}, c.Nodes...), c.Replicas...) {
		if ids[s.Addr] == id {
			return s
		}
	}
	c.Nodes[0].t.Fatalf("no node with id %s", id)
	return nil
}

func (c *Cluster) masterOfReplica(r *Server) *Server {
	ids, masterOf, _ := c.nodes(r, -1)
	return c.byID(ids, masterOf[ids[r.Addr]])
}

// MasterOf is the master that serves key, and its replica.
func (c *Cluster) MasterOf(key string) (master, replica *Server) {
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
	cl.Close()
	if err != nil {
		c.Nodes[0].t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	ids, masterOf, owner := c.nodes(c.Nodes[0], slot)
	master = c.byID(ids, owner)
	for _, r := range c.Replicas {
		if masterOf[ids[r.Addr]] == owner {
			replica = r
		}
	}
	return master, replica
}

// TakeOver makes s, a cluster replica whose master is gone, the master of
// its slots at once (CLUSTER FAILOVER TAKEOVER: no vote), and waits until
// it says so.
func (s *Server) TakeOver() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Do(context.Background(), "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		s.t.Fatalf("taking over on %s: %v", s.Addr, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		role, err := c.Do(context.Background(), "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not become a master: %v %v", s.Addr, role, err)
		}
	}
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	addrs := c.Addrs()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Addrs are every node's address, masters first.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, s := range append(append([]*Server{}, c.Nodes...), c.Replicas...) {
		addrs = append(addrs, s.Addr)
	}
	return addrs
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

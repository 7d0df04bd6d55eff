package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// serveGateway runs a gateway with Serve, as tollgate serve does, on a
// loopback port: the server's own timeouts apply, not httptest's.
func serveGateway(t *testing.T, extra string) string {
	t.Helper()
	sim, err := simulated.New(simulated.Options{APIKey: "upstream-secret"})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	src := extra + strings.Replace(strings.Replace(baseConfig, "TEAM_LIMITS", monthlyTen, 1), "KEY_LIMITS", "", 1)
	a := apptest.New(t, src, map[string]string{"UPSTREAM": up.URL + "/v1", "KEY_HASH": policy.HashKey(testKey), "NARROW_HASH": policy.HashKey(narrowKey), "UNLIMITED_HASH": policy.HashKey(unlimitedKey)})
	addr, _ := apptest.Run(t, a)
	return addr
}

// slowClient sends head at once, then one byte of tail every tick until
// the server answers or closes; it returns the status line ("" if closed
// without one) and how long the server took.
func slowClient(addr, head string, tick time.Duration) (status string, took time.Duration, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		return "", 0, err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for i := 0; i < 600; i++ { // a minute at most
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && err != io.EOF && !strings.Contains(err.Error(), "reset") {
		return "", time.Since(start), err
	}
	return strings.TrimSpace(line), time.Since(start), nil
}

// Slow clients do not keep connections: 100 trickling bodies get 408 and
// 100 trickling headers are closed, each within its deadline, while a
// client at a normal pace is served.
func TestSlowClientsAreCutOff(t *testing.T) {
	addr := serveGateway(t, "server: {read_header_timeout: 1s, body_timeout: 3s, body_grace: 500ms, min_body_rate: 1000}\n")
	body := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", testKey)
	header := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: "
	var wg sync.WaitGroup
	type result struct {
		kind, status string
		took         time.Duration
		err          error
	}
	results := make(chan result, 200)
	for i := range 200 {
		kind, head := "body", body
		if i%2 == 1 {
			kind, head = "header", header
		}
		wg.Go(func() {
			status, took, err := slowClient(addr, head, 100*time.Millisecond)
			results <- result{kind, status, took, err}
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		switch {
		case r.err != nil:
			t.Fatalf("%s: %v", r.kind, r.err)
		case r.kind == "body" && !strings.Contains(r.status, " 408 "):
			t.Fatalf("a trickling body got %q after %v, want 408", r.status, r.took)
		case r.kind == "body" && r.took > 3*time.Second+5*time.Second: // slack for a loaded CI machine
			t.Fatalf("a trickling body held its connection %v, past body_timeout", r.took)
		case r.kind == "header" && r.took > time.Second+5*time.Second:
			t.Fatalf("trickling headers held the connection %v, past read_header_timeout", r.took)
		}
	}
	// A small body (its size within a second at min_body_rate) has its
	// whole deadline at once: body_grace and its size's time, 1.4s here.
	small := strings.Replace(body, "Content-Length: 100000", "Content-Length: 900", 1)
	if status, took, err := slowClient(addr, small, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(status, " 408 ") || took < 1400*time.Millisecond || took > 1400*time.Millisecond+5*time.Second {
		t.Fatalf("a small trickling body got %q after %v, want 408 after 1.4s", status, took)
	}
	// A body at a normal pace: two halves, a moment apart.
	payload := `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, payload[:20])
		time.Sleep(100 * time.Millisecond)
		_, _ = io.WriteString(pw, payload[20:])
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", pr)
	req.ContentLength = int64(len(payload))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a client at a normal pace: %d", resp.StatusCode)
	}
}

// One client holding many slow connections (a slowloris from one address)
// takes at most server.max_connections_per_address of them: the rest of
// its connections are closed at once, and another client — and the health
// probe — are served while it holds its share. Before the per-address cap,
// its sockets filled max_connections and every other request waited for
// their header timeout.
func TestASlowlorisFromOneAddressLeavesRoomForOthers(t *testing.T) {
	addr := serveGateway(t, "server: {max_connections: 64, max_connections_per_address: 16, read_header_timeout: 60s}\n")
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range 200 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Half a request line, then nothing: the connection is held until
		// read_header_timeout, or closed at once past the cap.
		_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
		held = append(held, c)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/readyz", "/v1/budget"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s while one address holds 200 slow connections: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		t.Logf("%s answered in %v", path, time.Since(start))
	}
	var body []byte
	if !testkit.WaitFor(5*time.Second, func() bool {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), "tollgate_connections_refused_per_address_total 184\n")
	}) {
		t.Fatalf("want 184 connections refused past the cap of 16:\n%s", grepLines(string(body), "tollgate_connections_refused"))
	}
}

// The probes answer on metrics_listen too, a listener no client connection
// can fill, beside the metrics.
func TestProbesAnswerOnTheMetricsListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	serveGateway(t, "metrics_listen: "+maddr+"\n")
	for path, want := range map[string]string{"/readyz": `"ready"`, "/healthz": `"ok"`, "/metrics": "tollgate_"} {
		var status int
		var body []byte
		if !testkit.WaitFor(5*time.Second, func() bool {
			resp, err := http.Get("http://" + maddr + path)
			if err != nil {
				return false
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
			return true
		}) || status != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s on metrics_listen: %d %.200s", path, status, body)
		}
	}
}

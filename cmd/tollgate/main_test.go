package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/policy"
)

func TestCheckConfig(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "../../examples/tollgate.yaml"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "ok (1 upstreams, 8 models, 1 orgs, 2 keys)") {
		t.Fatalf("output %q", out.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: \":1\"\nupstreams:\n  - name: x\n    base_url: ftp://nope\n    models: [m]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"check-config", bad}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d for a bad config", code)
	}
	for _, want := range []string{"line 4: upstreams.0.base_url: want an http(s) URL", `line 5: upstreams.0.models.0: model "m" has no price`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("errors lack %q:\n%s", want, errOut.String())
		}
	}
}

func TestKeysNew(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"keys", "new"}, &out, io.Discard); code != 0 {
		t.Fatal("keys new failed")
	}
	var key, hash string
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "key:  "); ok {
			key = v
		}
		if v, ok := strings.CutPrefix(line, "hash: "); ok {
			hash = v
		}
	}
	if !strings.HasPrefix(key, "tg-") || len(key) < 20 || hash != policy.HashKey(key) {
		t.Fatalf("key %q hash %q", key, hash)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code := run(context.Background(), []string{"frobnicate"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit %d", code)
	}
}

// A demo whose port is taken exits 1 with the listener's error naming
// the address — the gateway's and the simulated upstreams' — and stops
// what it had started.
func TestDemoOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, flag := range []string{"--listen", "--upstream-listen"} {
		var stderr strings.Builder
		code := run(context.Background(), []string{"demo", flag, taken, "--data", t.TempDir()}, io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), taken) || !strings.Contains(stderr.String(), "address already in use") {
			t.Fatalf("%s %s: exit %d, %q", flag, taken, code, stderr.String())
		}
	}
}

// TestDemoCurl runs `tollgate demo`, takes the key from its
// TOLLGATE_API_KEY= line and runs the curl command it prints, as a user would.
func TestDemoCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed for this test (apt-get install curl)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--chunk-delay", "0"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var key, curlLine string
	for sc.Scan() && curlLine == "" {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "TOLLGATE_API_KEY="); ok {
			key = v
		}
		if strings.HasPrefix(line, "curl ") {
			curlLine = line
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if key == "" || curlLine == "" {
		t.Fatal("the demo printed no key or no curl command")
	}
	cmdCtx, cancelCmd := context.WithTimeout(ctx, 10*time.Second)
	defer cancelCmd()
	out, err := exec.CommandContext(cmdCtx, "sh", "-c", strings.Replace(curlLine, "curl ", curl+" ", 1)).Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.Model != "claude-sonnet-4-5" || len(resp.Choices) == 0 || resp.Usage.PromptTokens == 0 {
		t.Fatalf("curl got %s (%v)", out, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exited %d", code)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("demo did not shut down")
	}
}

// Every command and subcommand answers -h and --help on stdout with exit
// 0; a wrong flag or argument is one line and a hint on stderr with exit
// 2, as Go's own tools do.
func TestCommandLineConventions(t *testing.T) {
	for _, cmd := range [][]string{
		{"serve"}, {"check-config"}, {"keys"}, {"keys", "new"}, {"keys", "create"}, {"keys", "list"}, {"keys", "revoke"}, {"models"}, {"demo"},
		{"mock-upstream"}, {"report"}, {"statement"}, {"ceiling"}, {"ceiling", "set"}, {"ceiling", "show"}, {"ceiling", "reset-period"},
		{"ledger"}, {"ledger", "reseed"}, {"version"},
	} {
		for _, h := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), append(slices.Clone(cmd), h), &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "usage: tollgate "+cmd[0]) || errOut.Len() != 0 {
				t.Errorf("%v %s: exit %d, stdout %q, stderr %q", cmd, h, code, out.String(), errOut.String())
			}
		}
		if cmd[0] == "keys" && len(cmd) == 2 && cmd[1] == "new" || cmd[0] == "version" {
			continue // no flags to get wrong but the extra argument
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(slices.Clone(cmd), "--no-such-flag"), &out, &errOut)
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'tollgate "+cmd[0]) {
			t.Errorf("%v --no-such-flag: exit %d, stderr %q", cmd, code, errOut.String())
		}
	}
	for _, args := range [][]string{{"serve", "extra"}, {"check-config"}, {"check-config", "a.yaml", "b.yaml"}, {"keys", "new", "extra"}, {"ceiling", "frob"}, {"ledger"}} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	var out bytes.Buffer
	t.Setenv("OPENAI_API_KEY", "sk-test")
	if code := run(context.Background(), []string{"check-config", "--config", "../../examples/tollgate.yaml"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), ": ok (") {
		t.Errorf("check-config --config: %d %s", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"version"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("version: %d %q", code, out.String())
	}
	// No admin token: said before any call is made.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	called := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			called <- struct{}{}
			c.Close()
		}
	}()
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "")
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"report", "--url", "http://" + ln.Addr().String()}, io.Discard, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "no admin token: give --token or set TOLLGATE_ADMIN_TOKEN") {
		t.Errorf("report without a token: %d %s", code, errOut.String())
	}
	select {
	case <-called:
		t.Error("report called the gateway without a token")
	default:
	}
}

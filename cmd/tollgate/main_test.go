package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

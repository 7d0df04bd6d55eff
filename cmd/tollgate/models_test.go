package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tollgate models shows each served model with the price in force and
// where it comes from; --catalog lists the built-in catalogue.
func TestModelsCommand(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "t.yaml")
	src := "upstreams:\n  - {name: openai, base_url: \"https://api.openai.com/v1\", models: [gpt-4o, gpt-4o-mini]}\nmodels:\n  gpt-4o-mini: {input: \"$0.10\"}\n"
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"models", "--config", cfg}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"litellm", "gpt-4o  ", "$2.50", "$10.00", "catalogue (openai", "gpt-4o-mini", "$0.10", "config + catalogue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"models", "--catalog", "--provider", "gemini", "--format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rows []modelRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) < 10 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Provider != "gemini" {
			t.Fatalf("a %s row in gemini's list", r.Provider)
		}
	}
	if code := run(context.Background(), []string{"models"}, &out, &errOut); code == 0 {
		t.Fatal("models without --config or --catalog succeeded")
	}
}

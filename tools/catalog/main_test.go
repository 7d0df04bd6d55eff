package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The generator keeps the chat and embedding models of the providers the
// gateway serves, at their ids there, in µ$ per million tokens, one per
// line: the golden file is what a small LiteLLM file becomes.
func TestGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "models.json")
	if err := run("testdata/litellm.json", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/models.golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile("testdata/models.golden.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil || string(got) != string(want) {
		t.Fatalf("generated:\n%s\nwant:\n%s", got, want)
	}
}

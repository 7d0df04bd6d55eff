package bound_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// clientRefusals are the recorded requests the gateway refuses, and the
// field each refusal names: the providers' web search, which bills per
// call, on a model whose operator has not priced it (models.<name>.web_search).
var clientRefusals = map[string]string{
	"claude-code/17-web-search-tool-2.json": "tools[0].type", // Anthropic's web search
	"codex/01-plain-gpt-4.1-1.json":         "tools[8].type", // OpenAI's web search
	"codex/02-plain-gpt-4.1-2.json":         "tools[8].type", // the same
	"codex/04-reasoning-high-1.json":        "tools[8].type", // the same
	"codex/05-reasoning-high-2.json":        "tools[8].type", // the same
	"codex/06-output-schema-1.json":         "tools[8].type", // the same
	"codex/07-output-schema-2.json":         "tools[8].type", // the same
	"codex/08-image-input-1.json":           "tools[8].type", // the same
	"codex/09-image-input-2.json":           "tools[8].type", // the same
	"codex/10-workspace-write-1.json":       "tools[8].type", // the same
	"codex/11-workspace-write-2.json":       "tools[8].type", // the same
	"codex/12-web-search-live-1.json":       "tools[8].type", // the same
	"codex/13-web-search-live-2.json":       "tools[8].type", // the same
}

// Every request the real clients sent (scripts/agents/capture.sh records
// them: Claude Code, Codex, opencode, the SDKs, LangChain, the AI SDK) is
// read and bounded, its fields and betas all known — or refused for a
// tool the bound cannot price, naming it. A client field the allow-list
// lacks fails here before a user meets it.
func TestClientShapesAreKnown(t *testing.T) {
	files, err := filepath.Glob("../../internal/e2e/testdata/clients/*/*.json")
	if err != nil || len(files) < 100 {
		t.Fatalf("%d fixtures (%v): record them with scripts/agents/capture.sh", len(files), err)
	}
	m := model(t, "o200k_base")
	m.MaxOutputTokens, m.PDFPageTokens, m.AudioTokensPerSecond = 128000, 3000, 10
	emb := *m
	emb.Embedding = true
	bounded := 0
	for _, f := range files {
		name := strings.TrimPrefix(filepath.ToSlash(f), "../../internal/e2e/testdata/clients/")
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Path    string            `json:"path"`
			Headers map[string]string `json:"headers"`
			Body    json.RawMessage   `json:"body"`
		}
		if err := json.Unmarshal(raw, &fx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ep, mm := bound.Endpoint(0), m
		switch p := fx.Path; {
		case strings.HasSuffix(p, "/chat/completions"):
			ep = bound.Chat
		case strings.HasSuffix(p, "/messages"):
			ep = bound.Messages
		case strings.HasSuffix(p, "/responses"):
			ep = bound.Responses
		case strings.HasSuffix(p, "/embeddings"):
			ep, mm = bound.Embeddings, &emb
		default:
			continue // an endpoint that is not bounded here (models, count_tokens, Gemini's)
		}
		h := http.Header{}
		for k, v := range fx.Headers {
			h.Set(k, v)
		}
		req, err := bound.Parse(ep, fx.Body, h)
		if err == nil {
			_, err = req.Prepare(mm, native{})
		}
		if want, refused := clientRefusals[name]; refused {
			t.Run(name, func(t *testing.T) { refusal(t, err, want) })
			// Claude Code's and Codex's web search: bounded on a model
			// whose operator priced it.
			if strings.Contains(name, "web-search") && ep == bound.Messages || strings.HasPrefix(name, "codex/") {
				searching := *mm
				searching.WebSearch = bound.WebSearch{MaxUses: 8, ResultTokens: 5000}
				p, err := req.Prepare(&searching, native{})
				if err != nil || p.WebSearches != 8 {
					t.Errorf("%s, on a model whose web search is priced: %v", name, err)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		bounded++
	}
	t.Logf("%d recorded requests bounded, %d refused as expected", bounded, len(clientRefusals))
}

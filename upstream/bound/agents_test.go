package bound_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// What a Claude Code turn reserves on Claude Sonnet 4.5's list prices,
// from the requests the real client sent (testdata/clients/claude-code),
// bounded by default (UTF-8 bytes) and with token_ratio: 1.35: the
// figures docs/agents.md quotes (go test ./upstream/bound -run
// TestClaudeCodeTurnReservations -v). The bytes are never fewer than
// the BPE count the calibrated bound scales.
func TestClaudeCodeTurnReservations(t *testing.T) {
	files, err := filepath.Glob("../../internal/e2e/testdata/clients/claude-code/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d fixtures: %v", len(files), err)
	}
	c, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	sonnet := budget.Price{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000, WebSearch: 10_000}
	var table strings.Builder
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Path    string            `json:"path"`
			Headers map[string]string `json:"headers"`
			Body    json.RawMessage   `json:"body"`
		}
		if err := json.Unmarshal(raw, &fx); err != nil || !strings.HasSuffix(fx.Path, "/messages") {
			continue
		}
		h := http.Header{}
		for k, v := range fx.Headers {
			h.Set(k, v)
		}
		var in [2]int64
		var cost [2]budget.Money
		var out int64
		ok := true
		for i, counter := range []*tokenizer.Counter{c.Bytes(), c} {
			m := model(t, "o200k_base")
			m.Counter, m.MaxOutputTokens, m.ImageTokens, m.PDFPageTokens = counter, 64000, 1600, 3100
			m.WebSearch = bound.WebSearch{MaxUses: 8, ResultTokens: 5000}
			if i == 1 {
				m.TokenRatio = 1.35
			}
			req, err := bound.Parse(bound.Messages, fx.Body, h)
			var p *bound.Prepared
			if err == nil {
				p, err = req.Prepare(m, native{})
			}
			if err != nil {
				ok = false // refused (a server tool without its price): not a turn
				break
			}
			if cost[i], _, err = p.Cost(sonnet, 0); err != nil {
				t.Fatal(err)
			}
			in[i], out = p.InputTokens, p.MaxOutputTokens
		}
		if !ok {
			continue
		}
		n++
		// Every byte-level BPE count is at most the bytes: the calibrated
		// count, that count × 1.35, is at most 1.35 × the bytes.
		if in[0]*135 < in[1]*100 {
			t.Errorf("%s: the bytes bound is %d input tokens, under the BPE count the calibrated %d was scaled from", f, in[0], in[1])
		}
		fmt.Fprintf(&table, "\n  %-28s input %7d bytes / %6d × 1.35, output cap %5d: $%.3f / $%.3f", filepath.Base(f), in[0], in[1], out, float64(cost[0])/1e6, float64(cost[1])/1e6)
	}
	if n < 10 {
		t.Fatalf("only %d turns bounded", n)
	}
	t.Logf("Claude Code turns on Sonnet 4.5's prices, reserved by default / calibrated:%s", table.String())
}

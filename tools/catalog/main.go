// Command catalog regenerates upstream/catalog/models.json, the price
// catalogue built into the gateway, from LiteLLM's price file — the
// maintained public source most gateways read (BerriAI/litellm,
// model_prices_and_context_window.json). It keeps the chat, responses,
// completion and embedding models of the providers Tollgate speaks to,
// converts every price to integer micro-dollars per million tokens, and
// writes one model per line, sorted, so a change reads as a diff.
//
//	curl -sSfo /tmp/litellm.json https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json
//	go run ./tools/catalog -from /tmp/litellm.json -out upstream/catalog/models.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// SourceURL is where the price file comes from.
const SourceURL = "https://github.com/BerriAI/litellm/blob/main/model_prices_and_context_window.json"

func main() {
	from := flag.String("from", "", "LiteLLM's model_prices_and_context_window.json (a local copy)")
	out := flag.String("out", "upstream/catalog/models.json", "where to write the catalogue")
	flag.Parse()
	if *from == "" {
		fmt.Fprintln(os.Stderr, "catalog: -from is required (download the file first; see the package comment)")
		os.Exit(2)
	}
	if err := run(*from, *out); err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
}

func run(from, out string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var src map[string]json.RawMessage
	if err := json.Unmarshal(raw, &src); err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	c := catalog.File{Source: SourceURL}
	if u, ok := src["last_updated"]; ok {
		var s string
		if json.Unmarshal(u, &s) == nil {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				c.Updated = t.UTC().Format(time.DateOnly)
			}
		}
	}
	for key, v := range src {
		var e litellmEntry
		if json.Unmarshal(v, &e) != nil || e.Provider == "" {
			continue
		}
		provider, model, ok := name(e.Provider, key)
		if !ok || !slices.Contains([]string{"chat", "responses", "completion", "embedding"}, e.Mode) {
			continue
		}
		m, err := e.entry(provider, model)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		c.Models = append(c.Models, m)
	}
	slices.SortFunc(c.Models, func(a, b catalog.Entry) int {
		return strings.Compare(a.Provider+"\x00"+a.Model, b.Provider+"\x00"+b.Model)
	})
	c.Models = slices.CompactFunc(c.Models, func(a, b catalog.Entry) bool { return a.Provider == b.Provider && a.Model == b.Model })
	return os.WriteFile(out, encode(c), 0o644)
}

// name maps LiteLLM's provider and key to Tollgate's provider kind and the
// model id that provider's API takes; ok is false for what Tollgate does
// not serve.
func name(litellm, key string) (provider, model string, ok bool) {
	strip := func(prefix string) (string, bool) {
		m, found := strings.CutPrefix(key, prefix)
		return m, found && m != ""
	}
	switch litellm {
	case "openai", "anthropic":
		return litellm, key, !strings.Contains(key, "/")
	case "azure":
		m, ok := strip("azure/")
		return "azure", m, ok && !strings.Contains(m, "/")
	case "gemini":
		m, ok := strip("gemini/")
		return "gemini", m, ok
	case "vertex_ai-language-models":
		return "vertex", key, !strings.Contains(key, "/")
	case "vertex_ai-anthropic_models":
		m, ok := strip("vertex_ai/")
		return "vertex", m, ok
	case "bedrock", "bedrock_converse":
		return "bedrock", key, !strings.Contains(key, "/")
	case "mistral", "groq", "deepseek", "xai":
		m, ok := strip(litellm + "/")
		return litellm, m, ok
	case "together_ai":
		m, ok := strip("together_ai/")
		return "together", m, ok
	case "fireworks_ai":
		m, ok := strip("fireworks_ai/")
		return "fireworks", m, ok
	case "openrouter":
		m, ok := strip("openrouter/")
		return "openrouter", m, ok
	}
	return "", "", false
}

// litellmEntry is the part of a LiteLLM entry the catalogue takes: prices
// in dollars per token (per image for images).
type litellmEntry struct {
	Provider string `json:"litellm_provider"`
	Mode     string `json:"mode"`

	Input       *float64 `json:"input_cost_per_token"`
	CachedInput *float64 `json:"cache_read_input_token_cost"`
	CacheWrite  *float64 `json:"cache_creation_input_token_cost"`
	Output      *float64 `json:"output_cost_per_token"`
	Reasoning   *float64 `json:"output_cost_per_reasoning_token"`
	InputAudio  *float64 `json:"input_cost_per_audio_token"`
	OutputAudio *float64 `json:"output_cost_per_audio_token"`
	InputImage  *float64 `json:"input_cost_per_image"`

	Input200k       *float64 `json:"input_cost_per_token_above_200k_tokens"`
	Output200k      *float64 `json:"output_cost_per_token_above_200k_tokens"`
	CachedInput200k *float64 `json:"cache_read_input_token_cost_above_200k_tokens"`
	CacheWrite200k  *float64 `json:"cache_creation_input_token_cost_above_200k_tokens"`
	Input272k       *float64 `json:"input_cost_per_token_above_272k_tokens"`
	Output272k      *float64 `json:"output_cost_per_token_above_272k_tokens"`
	CachedInput272k *float64 `json:"cache_read_input_token_cost_above_272k_tokens"`
	Input128k       *float64 `json:"input_cost_per_token_above_128k_tokens"`
	Output128k      *float64 `json:"output_cost_per_token_above_128k_tokens"`

	MaxInput  json.Number `json:"max_input_tokens"`
	MaxOutput json.Number `json:"max_output_tokens"`

	Vision bool `json:"supports_vision"`
	PDF    bool `json:"supports_pdf_input"`
	Tools  bool `json:"supports_function_calling"`
	Schema bool `json:"supports_response_schema"`
	Audio  bool `json:"supports_audio_input"`
}

func (e *litellmEntry) entry(provider, model string) (catalog.Entry, error) {
	m := catalog.Entry{Provider: provider, Model: model, Mode: e.Mode,
		Vision: e.Vision, PDF: e.PDF, Tools: e.Tools, Schema: e.Schema, Audio: e.Audio}
	var err error
	set := func(dst *int64, v *float64) {
		if v == nil || err != nil {
			return
		}
		*dst, err = perMillion(*v)
	}
	set(&m.Input, e.Input)
	set(&m.CachedInput, e.CachedInput)
	set(&m.CacheWrite, e.CacheWrite)
	set(&m.Output, e.Output)
	set(&m.Reasoning, e.Reasoning)
	set(&m.InputAudio, e.InputAudio)
	set(&m.OutputAudio, e.OutputAudio)
	if e.InputImage != nil && err == nil {
		m.InputImage, err = micros(*e.InputImage)
	}
	for _, tier := range []struct {
		above                                  int64
		input, output, cachedInput, cacheWrite *float64
	}{
		{128_000, e.Input128k, e.Output128k, nil, nil},
		{200_000, e.Input200k, e.Output200k, e.CachedInput200k, e.CacheWrite200k},
		{272_000, e.Input272k, e.Output272k, e.CachedInput272k, nil},
	} {
		if tier.input == nil && tier.output == nil {
			continue
		}
		t := &catalog.Tier{Above: tier.above}
		set(&t.Input, tier.input)
		set(&t.Output, tier.output)
		set(&t.CachedInput, tier.cachedInput)
		set(&t.CacheWrite, tier.cacheWrite)
		m.Above = t // the highest threshold with prices wins: there is one per model
	}
	m.MaxInputTokens, _ = e.MaxInput.Int64()
	m.MaxOutputTokens, _ = e.MaxOutput.Int64()
	return m, err
}

// perMillion converts dollars per token into micro-dollars per million
// tokens (1e-12 dollars per token), which every list price is a whole
// number of.
func perMillion(v float64) (int64, error) {
	if v < 0 || math.IsNaN(v) || v > 1 {
		return 0, fmt.Errorf("price %g dollars a token is out of range", v)
	}
	return int64(math.Round(v * 1e12)), nil
}

func micros(v float64) (int64, error) {
	if v < 0 || math.IsNaN(v) || v > 1e6 {
		return 0, fmt.Errorf("price %g dollars is out of range", v)
	}
	return int64(math.Round(v * 1e6)), nil
}

// encode writes c with one model per line.
func encode(c catalog.File) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"source\": %q,\n  \"updated\": %q,\n  \"models\": [\n", c.Source, c.Updated)
	for i, m := range c.Models {
		line, _ := json.Marshal(m)
		b.WriteString("    ")
		b.Write(line)
		if i < len(c.Models)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// Package catalog is the price catalogue built into the gateway: list
// prices, context and output limits and capabilities of the models of
// every provider Tollgate speaks to, embedded from models.json, which
// tools/catalog regenerates from LiteLLM's maintained price file. Prices
// are integer micro-dollars per million tokens (per image for images).
// Config entries override it field by field; a model in neither is
// refused.
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// File is models.json.
type File struct {
	// Source is where the prices were taken from; Updated is that file's
	// own date (YYYY-MM-DD).
	Source  string  `json:"source"`
	Updated string  `json:"updated"`
	Models  []Entry `json:"models"`
}

// Entry is one model at one provider.
type Entry struct {
	// Provider is Tollgate's provider kind (openai, azure, anthropic,
	// gemini, vertex, bedrock, mistral, groq, deepseek, together,
	// fireworks, openrouter, xai); Model the id that provider's API takes.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Mode is chat, responses (the Responses API only), completion or
	// embedding.
	Mode string `json:"mode"`

	Input       int64 `json:"input,omitempty"`
	CachedInput int64 `json:"cached_input,omitempty"`
	CacheWrite  int64 `json:"cache_write,omitempty"`
	// CacheWrite1h is a one-hour cache write's rate (Anthropic: 2 × input).
	CacheWrite1h int64 `json:"cache_write_1h,omitempty"`
	Output       int64 `json:"output,omitempty"`
	// Reasoning is the rate of reasoning tokens where it is not Output's.
	Reasoning   int64 `json:"reasoning,omitempty"`
	InputAudio  int64 `json:"input_audio,omitempty"`
	OutputAudio int64 `json:"output_audio,omitempty"`
	// InputImage is a price per input image, in micro-dollars.
	InputImage int64 `json:"input_image,omitempty"`
	// Above prices a request whose input passes a threshold (long context).
	Above *Tier `json:"above,omitempty"`

	MaxInputTokens  int64 `json:"max_input_tokens,omitempty"`
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`

	Vision bool `json:"vision,omitempty"`
	PDF    bool `json:"pdf,omitempty"`
	Tools  bool `json:"tools,omitempty"`
	Schema bool `json:"schema,omitempty"`
	Audio  bool `json:"audio,omitempty"`
}

// Tier is the rates of a request whose input tokens are more than Above.
type Tier struct {
	Above        int64 `json:"above"`
	Input        int64 `json:"input,omitempty"`
	CachedInput  int64 `json:"cached_input,omitempty"`
	CacheWrite   int64 `json:"cache_write,omitempty"`
	CacheWrite1h int64 `json:"cache_write_1h,omitempty"`
	Output       int64 `json:"output,omitempty"`
}

//go:embed models.json
var data []byte

var (
	once   sync.Once
	loaded File
	index  map[string]int
)

func load() {
	if err := json.Unmarshal(data, &loaded); err != nil {
		panic(fmt.Sprintf("catalog: the embedded models.json does not decode: %v", err)) // a build-time fact, tested
	}
	index = make(map[string]int, len(loaded.Models))
	for i, m := range loaded.Models {
		index[m.Provider+"\x00"+m.Model] = i
	}
}

// Lookup returns model at provider (a provider kind; see Entry). Providers
// that resell another's models under the same ids (an OpenAI-compatible
// preset without entries of its own) are not guessed at.
func Lookup(provider, model string) (Entry, bool) {
	once.Do(load)
	i, ok := index[provider+"\x00"+model]
	if !ok {
		return Entry{}, false
	}
	return loaded.Models[i], true
}

// All returns every entry, sorted by provider and model.
func All() []Entry {
	once.Do(load)
	return loaded.Models
}

// Source is where the catalogue's prices come from, and that file's date.
func Source() (url, updated string) {
	once.Do(load)
	return loaded.Source, loaded.Updated
}

// Encoding is the tiktoken encoding that counts model's tokens exactly, or
// "" when the model's tokenizer is not one (its count is then o200k_base's
// × a token ratio).
func Encoding(provider, model string) string {
	if provider != "openai" && provider != "azure" {
		return ""
	}
	m := strings.TrimPrefix(model, "ft:")
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "gpt-oss", "codex", "computer-use"} {
		if strings.HasPrefix(m, p) {
			return "o200k_base"
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada", "davinci", "babbage"} {
		if strings.HasPrefix(m, p) {
			return "cl100k_base"
		}
	}
	return ""
}

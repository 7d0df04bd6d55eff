package upstream

import (
	"encoding/json"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
)

// wireUsage is OpenAI's usage block. Pointers tell a missing figure from 0.
type wireUsage struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
		AudioTokens  *int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
		AudioTokens     *int64 `json:"audio_tokens"`
	} `json:"completion_tokens_details"`
}

func set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

var errNoUsage = errors.New("upstream: no usage reported")

// usage converts a wire usage block, refusing missing, negative or
// inconsistent figures.
func (w *wireUsage) usage() (budget.Usage, error) {
	if w == nil || w.PromptTokens == nil {
		return budget.Usage{}, errNoUsage
	}
	u := budget.Usage{InputTokens: *w.PromptTokens}
	if w.CompletionTokens != nil {
		u.OutputTokens = *w.CompletionTokens
	}
	if d := w.PromptTokensDetails; d != nil {
		set(&u.CachedInputTokens, d.CachedTokens)
		set(&u.InputAudioTokens, d.AudioTokens)
	}
	if d := w.CompletionTokensDetails; d != nil {
		set(&u.ReasoningTokens, d.ReasoningTokens)
		set(&u.OutputAudioTokens, d.AudioTokens)
	}
	if err := u.Validate(); err != nil {
		return budget.Usage{}, err
	}
	return u, nil
}

// UsageFromJSON extracts the usage of a non-streaming response body. ok is
// false when the body reports no valid usage.
func UsageFromJSON(body []byte) (u budget.Usage, ok bool) {
	// Only the usage object is decoded; gjson finds it without decoding
	// the rest of a response that may be megabytes of embeddings.
	if !gjson.ValidBytes(body) {
		return budget.Usage{}, false
	}
	raw := gjson.GetBytes(body, "usage")
	if !raw.IsObject() {
		return budget.Usage{}, false
	}
	var w wireUsage
	if err := json.Unmarshal([]byte(raw.Raw), &w); err != nil {
		return budget.Usage{}, false
	}
	u, err := w.usage()
	return u, err == nil
}

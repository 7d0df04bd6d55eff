package budget

import "fmt"

// Usage is what one request consumed, as the upstream reported it or as the
// gateway counted it.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`        // all prompt tokens, cached ones included
	CachedInputTokens int64 `json:"cached_input_tokens"` // the part of InputTokens read from the provider's cache
	CacheWriteTokens  int64 `json:"cache_write_tokens"`  // the part of InputTokens written to the provider's cache (Anthropic)
	// CacheWrite1hTokens is the part of CacheWriteTokens written for an
	// hour (Anthropic's ttl "1h"), billed at its own rate.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
	OutputTokens       int64 `json:"output_tokens"`    // completion tokens, reasoning tokens included
	ReasoningTokens    int64 `json:"reasoning_tokens"` // the part of OutputTokens spent on reasoning
	// InputAudioTokens and OutputAudioTokens are the audio parts of
	// InputTokens and OutputTokens.
	InputAudioTokens  int64 `json:"input_audio_tokens,omitempty"`
	OutputAudioTokens int64 `json:"output_audio_tokens,omitempty"`
	// WebSearches are the web searches the provider ran for the request,
	// each billed a fee (Price.WebSearch).
	WebSearches int64 `json:"web_searches,omitempty"`
	// Estimated is true when the upstream reported no usage and the gateway
	// counted the tokens itself (a truncated stream, a client that went away),
	// or charged the reservation's bound for a figure the upstream left out.
	Estimated bool `json:"estimated"`
	// Unreported names the figures the upstream's usage left out, each
	// charged at the most it could have been (the request's bound): a
	// figure not reported is never read as 0.
	Unreported []string `json:"unreported,omitempty"`
}

// TotalTokens is InputTokens + OutputTokens.
func (u Usage) TotalTokens() int64 { return u.InputTokens + u.OutputTokens }

// maxTokens bounds any single usage figure: no model takes a billion tokens
// in one request, and the bound keeps every product far from int64 overflow.
const maxTokens = 1 << 40

// Validate refuses negative, inconsistent or absurd figures, so that a broken
// or hostile upstream body cannot turn a charge into a refund.
func (u Usage) Validate() error {
	for _, v := range [...]int64{u.InputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.OutputTokens, u.ReasoningTokens, u.InputAudioTokens, u.OutputAudioTokens, u.WebSearches} {
		if v < 0 || v > maxTokens {
			return fmt.Errorf("budget: usage figure %d out of range", v)
		}
	}
	if u.CachedInputTokens+u.CacheWriteTokens > u.InputTokens {
		return fmt.Errorf("budget: cached (%d) and cache-write (%d) input tokens exceed input tokens %d", u.CachedInputTokens, u.CacheWriteTokens, u.InputTokens)
	}
	if u.CachedInputTokens+u.CacheWriteTokens+u.InputAudioTokens > u.InputTokens {
		return fmt.Errorf("budget: cached, cache-write and audio input tokens exceed input tokens %d", u.InputTokens)
	}
	if u.CacheWrite1hTokens > u.CacheWriteTokens {
		return fmt.Errorf("budget: one-hour cache-write tokens %d exceed cache-write tokens %d", u.CacheWrite1hTokens, u.CacheWriteTokens)
	}
	if u.OutputAudioTokens > u.OutputTokens {
		return fmt.Errorf("budget: audio output tokens %d exceed output tokens %d", u.OutputAudioTokens, u.OutputTokens)
	}
	if u.ReasoningTokens > u.OutputTokens {
		return fmt.Errorf("budget: reasoning tokens %d exceed output tokens %d", u.ReasoningTokens, u.OutputTokens)
	}
	return nil
}

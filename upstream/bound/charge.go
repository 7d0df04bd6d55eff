package bound

import (
	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Cost is the most p may bill at price — every token at the dearest rate
// it may bill at — and the most tokens it may take, with its output cap
// per choice lowered to k (0: its own).
func (p *Prepared) Cost(price budget.Price, k int64) (budget.Money, int64, error) {
	if p.LongContext && p.InputTokens > longContext && price.Above == nil {
		return 0, 0, badRequest("anthropic-beta", "the request may pass %d input tokens (its bound is %d), which the context-1m beta bills at a long-context price the model has none of (set its above tier): the gateway cannot bound it", longContext, p.InputTokens)
	}
	if p.CacheWrites1h && price.CacheWrite1h <= 0 {
		return 0, 0, badRequest("cache_control.ttl", "a one-hour cache write bills above the input price (Anthropic: twice it), and the model has no cache_write_1h price: the gateway cannot bound it; set models.<name>.cache_write_1h, or leave ttl out")
	}
	if !p.CacheWrites1h {
		// No write can be for an hour: the hour's rate is not the bound.
		price = price.WithoutHourCacheWrites()
	}
	out := p.MaxOutputTokens
	if k > 0 && k < p.OutputCap {
		out = k*p.Choices + p.Predicted
	}
	if p.WebSearches > 0 && price.WebSearch <= 0 {
		return 0, 0, badRequest("tools", "the web search tools may run %d searches, and the model has no price for one: the gateway cannot bound them; set models.<name>.web_search.price", p.WebSearches)
	}
	c, err := price.BoundCost(p.InputTokens, p.InputAudioTokens, out, p.AudioOutput)
	if err != nil {
		return 0, 0, err
	}
	fees, err := budget.Price{WebSearch: price.WebSearch}.Cost(budget.Usage{WebSearches: p.WebSearches})
	return c + fees, p.InputTokens + out, err
}

// longContext is the input past which Anthropic's long-context price
// applies.
const longContext = 200_000

// Reserved is the usage of p's whole bound, which settles it at what was
// reserved: where the upstream reported nothing usable.
func (p *Prepared) Reserved() budget.Usage {
	return budget.Usage{InputTokens: p.InputTokens, OutputTokens: p.MaxOutputTokens, WebSearches: p.WebSearches, Estimated: true}
}

// Charge is the usage p is settled at, at price, for what its upstream
// reported: each figure as reported, and each one it left out at the most
// it could be — the input or the output at p's bound, a part of them
// (cached, cache writes, reasoning, audio) at all of its whole where its
// rate is dearer than the whole's and the request could have had it, else
// at none. A figure left out is named in Unreported, and never read as 0
// where 0 would charge less.
func (p *Prepared) Charge(u convert.Usage, price budget.Price) budget.Usage {
	b := budget.Usage{InputTokens: u.Input, CachedInputTokens: u.CachedInput, CacheWriteTokens: u.CacheWrite, CacheWrite1hTokens: u.CacheWrite1h,
		OutputTokens: u.Output, ReasoningTokens: u.Reasoning, InputAudioTokens: u.InputAudio, OutputAudioTokens: u.OutputAudio,
		WebSearches: u.WebSearches}
	missing := func(f convert.Figures) bool { return u.Has&f == 0 }
	left := func(name string) { b.Unreported = append(b.Unreported, name) }
	if missing(convert.HasInput) {
		b.InputTokens = max(p.InputTokens, b.CachedInputTokens+b.CacheWriteTokens+b.InputAudioTokens)
		left("input_tokens")
	}
	if missing(convert.HasOutput) && p.MaxOutputTokens > 0 {
		b.OutputTokens = max(p.MaxOutputTokens, b.ReasoningTokens+b.OutputAudioTokens)
		left("output_tokens")
	}
	rest := func() int64 { return b.InputTokens - b.CachedInputTokens - b.CacheWriteTokens - b.InputAudioTokens }
	if missing(convert.HasCacheWrite) && (p.CacheWrites && dearerInput(price, func(t budget.Tier) budget.Money { return t.CacheWrite }, price.CacheWrite) ||
		p.CacheWrites1h && dearerInput(price, func(t budget.Tier) budget.Money { return t.CacheWrite1h }, price.CacheWrite1h)) {
		b.CacheWriteTokens += rest()
		left("cache_write_tokens")
	}
	if missing(convert.HasCacheWrite1h) && p.CacheWrites1h && b.CacheWriteTokens > b.CacheWrite1hTokens {
		// No TTL breakdown (Bedrock, an older answer): every write of a
		// request that asked for an hour may be one.
		b.CacheWrite1hTokens = b.CacheWriteTokens
		left("cache_write_1h_tokens")
	}
	if missing(convert.HasCachedInput) && dearerInput(price, func(t budget.Tier) budget.Money { return t.CachedInput }, price.CachedInput) {
		b.CachedInputTokens += rest()
		left("cached_input_tokens")
	}
	if missing(convert.HasInputAudio) && p.InputAudioTokens > 0 && price.InputAudio > price.Input {
		b.InputAudioTokens += min(rest(), p.InputAudioTokens)
		left("input_audio_tokens")
	}
	if missing(convert.HasReasoning) && price.Reasoning > price.Output {
		b.ReasoningTokens = b.OutputTokens
		left("reasoning_tokens")
	}
	if missing(convert.HasOutputAudio) && p.AudioOutput && price.OutputAudio > max(price.Output, price.Reasoning) {
		b.OutputAudioTokens = b.OutputTokens
		left("output_audio_tokens")
	}
	if missing(convert.HasWebSearches) && p.WebSearches > 0 && price.WebSearch > 0 {
		b.WebSearches = p.WebSearches
		left("web_searches")
	}
	b.Estimated = len(b.Unreported) > 0
	return b
}

// dearerInput reports whether a part of the input, at rate base (and at
// the long-context tier's rate of it, where price has one), costs more
// than the input's own rate.
func dearerInput(price budget.Price, tier func(budget.Tier) budget.Money, base budget.Money) bool {
	if base > price.Input {
		return true
	}
	t := price.Above
	return t != nil && max(tier(*t), base) > max(t.Input, price.Input)
}

package budget

import "fmt"

// Price is what one model costs, in micro-dollars per one million tokens.
// The zero value is free; a model without a Price is unpriced and must be
// refused, never forwarded (see Prices.Lookup).
type Price struct {
	Input       Money // per 1M uncached input tokens
	CachedInput Money // per 1M input tokens served from the provider's cache
	CacheWrite  Money // per 1M input tokens written to the provider's cache (for five minutes)
	// CacheWrite1h is per 1M input tokens written to the cache for an hour
	// (Anthropic: twice the input rate); never below CacheWrite.
	CacheWrite1h Money
	Output       Money // per 1M output tokens (reasoning tokens included, unless Reasoning is set)
	// Reasoning, InputAudio and OutputAudio price the reasoning, audio
	// input and audio output parts of a request where the model prices
	// them apart; zero means at Output, Input and Output.
	Reasoning   Money
	InputAudio  Money
	OutputAudio Money
	// WebSearch is per web search the provider runs for a request
	// (Anthropic's web_search server tool: $10 per 1,000): a fee per
	// call, not per million tokens. Zero leaves searches unpriced, and a
	// request that may search is refused.
	WebSearch Money
	// Above, if set, prices a whole request whose input tokens are more
	// than Above.Tokens at its rates (long-context pricing): a zero rate
	// there means the base one.
	Above *Tier
}

// Tier is the rates of a request past a long-context threshold.
type Tier struct {
	Tokens       int64
	Input        Money
	CachedInput  Money
	CacheWrite   Money
	CacheWrite1h Money
	Output       Money
}

const perMillion = 1_000_000

// rates is p as it applies to u: the long-context tier's rates where u's
// input passes its threshold.
func (p Price) rates(u Usage) Price {
	t := p.Above
	if t == nil || u.InputTokens <= t.Tokens {
		return p
	}
	q := p
	for _, r := range [...]struct {
		dst *Money
		v   Money
	}{
		{&q.Input, t.Input}, {&q.CachedInput, t.CachedInput}, {&q.CacheWrite, t.CacheWrite}, {&q.CacheWrite1h, t.CacheWrite1h}, {&q.Output, t.Output},
	} {
		if r.v > 0 {
			*r.dst = r.v
		}
	}
	return q
}

func or(rate, base Money) Money {
	if rate > 0 {
		return rate
	}
	return base
}

// Cost returns what u costs at p, rounded up to the micro-dollar per kind of
// token, so a charge is never below the provider's own rounding. Cached,
// cache-write and audio tokens are parts of InputTokens (one-hour cache
// writes a part of the cache writes), reasoning and audio tokens parts of
// OutputTokens, each charged at its own rate.
func (p Price) Cost(u Usage) (Money, error) {
	if err := u.Validate(); err != nil {
		return 0, err
	}
	r := p.rates(u)
	uncached := u.InputTokens - u.CachedInputTokens - u.CacheWriteTokens - u.InputAudioTokens
	text := u.OutputTokens - u.OutputAudioTokens
	reasoning := int64(0)
	if r.Reasoning > 0 {
		reasoning = min(u.ReasoningTokens, text)
		text -= reasoning
	}
	var total int64
	for _, part := range [...]struct {
		tokens int64
		rate   Money
	}{
		{uncached, r.Input},
		{u.CachedInputTokens, r.CachedInput},
		{u.CacheWriteTokens - u.CacheWrite1hTokens, r.CacheWrite},
		{u.CacheWrite1hTokens, max(r.CacheWrite1h, r.CacheWrite)}, // an hour never costs less than five minutes
		{u.InputAudioTokens, or(r.InputAudio, r.Input)},
		{text, r.Output},
		{reasoning, r.Reasoning},
		{u.OutputAudioTokens, or(r.OutputAudio, r.Output)},
	} {
		c, err := mulDivCeil(part.tokens, int64(part.rate), perMillion)
		if err != nil {
			return 0, fmt.Errorf("pricing %d tokens: %w", part.tokens, err)
		}
		if total, err = addChecked(total, c); err != nil {
			return 0, fmt.Errorf("pricing usage: %w", err)
		}
	}
	fees, err := mulDivCeil(u.WebSearches, int64(p.WebSearch), 1)
	if err != nil {
		return 0, fmt.Errorf("pricing %d web searches: %w", u.WebSearches, err)
	}
	if total, err = addChecked(total, fees); err != nil {
		return 0, fmt.Errorf("pricing usage: %w", err)
	}
	return Money(total), nil
}

// Validate reports a negative rate.
func (p Price) Validate() error {
	if p.Input < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.CacheWrite1h < 0 || p.Output < 0 || p.Reasoning < 0 || p.InputAudio < 0 || p.OutputAudio < 0 || p.WebSearch < 0 {
		return fmt.Errorf("budget: negative price %+v", p)
	}
	if t := p.Above; t != nil && (t.Tokens < 0 || t.Input < 0 || t.CachedInput < 0 || t.CacheWrite < 0 || t.CacheWrite1h < 0 || t.Output < 0) {
		return fmt.Errorf("budget: negative long-context price %+v", *t)
	}
	return nil
}

// WithoutHourCacheWrites is p for a request that writes nothing to the
// cache for an hour: its one-hour write rates dropped.
func (p Price) WithoutHourCacheWrites() Price {
	p.CacheWrite1h = 0
	if p.Above != nil {
		t := *p.Above
		t.CacheWrite1h = 0
		p.Above = &t
	}
	return p
}

// BoundCost is the most a request can cost that bills at most in input
// tokens, at most audioIn of them audio, and at most out output tokens,
// audio only when audioOut: each token at the dearest rate it may be
// billed at. Text input is priced at the dearest of the input, cached and
// cache-write rates, the one-hour one included (the gateway cannot know
// which tokens the provider reads from or writes to its cache; a caller
// that knows no write can be for an hour zeroes CacheWrite1h first); audio input at the audio rate, or
// the text rate if that is dearer; output at the dearest of output,
// reasoning and — when the request asks for audio — audio. The
// long-context tier stays: a bound whose input is within its threshold
// bounds a request that is too.
func (p Price) BoundCost(in, audioIn, out int64, audioOut bool) (Money, error) {
	q := Price{Input: max(p.Input, p.CachedInput, p.CacheWrite, p.CacheWrite1h), Output: max(p.Output, p.Reasoning)}
	if audioOut {
		q.Output = max(q.Output, p.OutputAudio)
	}
	q.InputAudio = max(p.InputAudio, q.Input)
	if t := p.Above; t != nil {
		q.Above = &Tier{Tokens: t.Tokens,
			Input:  max(q.Input, t.Input, t.CachedInput, t.CacheWrite, t.CacheWrite1h),
			Output: max(q.Output, t.Output)}
		q.InputAudio = max(q.InputAudio, q.Above.Input)
	}
	return q.Cost(Usage{InputTokens: in, InputAudioTokens: min(max(audioIn, 0), in), OutputTokens: out})
}

// Times is p with every token rate multiplied by perMille/1000, each
// rounded up to the micro-dollar: the price of a mode or region that
// bills a multiple of the list price (Anthropic's fast mode 6×, its
// US-only inference 1.1×). The search fee is not a token rate: it stays.
func (p Price) Times(perMille int64) (Price, error) {
	if perMille == 1000 {
		return p, nil
	}
	var err error
	scale := func(m *Money) {
		if err != nil {
			return
		}
		var v int64
		v, err = mulDivCeil(int64(*m), perMille, 1000)
		*m = Money(v)
	}
	for _, m := range []*Money{&p.Input, &p.CachedInput, &p.CacheWrite, &p.CacheWrite1h, &p.Output, &p.Reasoning, &p.InputAudio, &p.OutputAudio} {
		scale(m)
	}
	if p.Above != nil {
		t := *p.Above
		for _, m := range []*Money{&t.Input, &t.CachedInput, &t.CacheWrite, &t.CacheWrite1h, &t.Output} {
			scale(m)
		}
		p.Above = &t
	}
	if err != nil {
		return Price{}, fmt.Errorf("budget: %d‰ of %+v: %w", perMille, p, err)
	}
	return p, nil
}

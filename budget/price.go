package budget

import "fmt"

// Price is what one model costs, in micro-dollars per one million tokens.
// The zero value is free; a model without a Price is unpriced and must be
// refused, never forwarded (see Prices.Lookup).
type Price struct {
	Input       Money // per 1M uncached input tokens
	CachedInput Money // per 1M input tokens served from the provider's cache
	CacheWrite  Money // per 1M input tokens written to the provider's cache
	Output      Money // per 1M output tokens (reasoning tokens included)
}

const perMillion = 1_000_000

// Cost returns what u costs at p, rounded up to the micro-dollar per kind of
// token, so a charge is never below the provider's own rounding. Cached and
// cache-write tokens are parts of InputTokens and are charged at their own
// rates instead of the input rate.
func (p Price) Cost(u Usage) (Money, error) {
	if err := u.Validate(); err != nil {
		return 0, err
	}
	uncached := u.InputTokens - u.CachedInputTokens - u.CacheWriteTokens
	var total int64
	for _, part := range [...]struct {
		tokens int64
		rate   Money
	}{
		{uncached, p.Input},
		{u.CachedInputTokens, p.CachedInput},
		{u.CacheWriteTokens, p.CacheWrite},
		{u.OutputTokens, p.Output},
	} {
		c, err := mulDivCeil(part.tokens, int64(part.rate), perMillion)
		if err != nil {
			return 0, fmt.Errorf("pricing %d tokens: %w", part.tokens, err)
		}
		if total, err = addChecked(total, c); err != nil {
			return 0, fmt.Errorf("pricing usage: %w", err)
		}
	}
	return Money(total), nil
}

// Validate reports a negative rate.
func (p Price) Validate() error {
	if p.Input < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.Output < 0 {
		return fmt.Errorf("budget: negative price %+v", p)
	}
	return nil
}

// ForEstimate is the price an upper bound is computed at: every input token
// at the dearest input rate, since the gateway cannot know in advance which
// tokens the provider will read from or write to its cache.
func (p Price) ForEstimate() Price {
	q := p
	q.Input = max(p.Input, p.CachedInput, p.CacheWrite)
	return q
}

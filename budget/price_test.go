package budget_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
)

// claudeLong is a long-context price: Sonnet 4.5's list prices, doubled
// input and 1.5× output above 200k input tokens.
var claudeLong = budget.Price{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, Output: 15_000_000,
	Above: &budget.Tier{Tokens: 200_000, Input: 6_000_000, CachedInput: 600_000, CacheWrite: 7_500_000, Output: 22_500_000}}

func TestLongContextAndAudioRates(t *testing.T) {
	audio := budget.Price{Input: 2_500_000, Output: 10_000_000, InputAudio: 40_000_000, OutputAudio: 80_000_000}
	for _, tc := range []struct {
		desc  string
		price budget.Price
		usage budget.Usage
		want  budget.Money
	}{
		{"at the threshold, the base rates", claudeLong, budget.Usage{InputTokens: 200_000, OutputTokens: 1000}, 600_000 + 15_000},
		{"past it, the whole request at the tier's", claudeLong, budget.Usage{InputTokens: 200_001, OutputTokens: 1000}, 1_200_006 + 22_500},
		{"cached tokens past it", claudeLong, budget.Usage{InputTokens: 300_000, CachedInputTokens: 100_000, OutputTokens: 0}, 1_200_000 + 60_000},
		{"audio in and out at their own rates", audio, budget.Usage{InputTokens: 1000, InputAudioTokens: 400, OutputTokens: 500, OutputAudioTokens: 100}, 1_500 + 16_000 + 4_000 + 8_000},
		{"reasoning at its own rate", budget.Price{Input: 1_000_000, Output: 2_000_000, Reasoning: 4_000_000}, budget.Usage{InputTokens: 10, OutputTokens: 100, ReasoningTokens: 60}, 10 + 80 + 240},
	} {
		got, err := tc.price.Cost(tc.usage)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.desc, got, err, tc.want)
		}
	}
}

// FuzzEstimateBoundsCost: whatever the rates and however a request's
// tokens turn out — cached, written to the cache, audio, reasoning — a
// usage within the bound's token counts never costs more than BoundCost.
func FuzzEstimateBoundsCost(f *testing.F) {
	f.Add(int64(3_000_000), int64(300_000), int64(3_750_000), int64(15_000_000), int64(0), int64(0), int64(0),
		int64(200_000), int64(6_000_000), int64(22_500_000), int64(250_000), int64(1000), int64(4000), int64(190_000), int64(100_000), int64(5), int64(1000), int64(10), int64(3), true)
	f.Fuzz(func(t *testing.T, in, cached, write, out, reasoning, inAudio, outAudio, above, tierIn, tierOut,
		estIn, estAudio, estOut, actIn, actCached, actWrite, actOut, actReasoning, actAudio int64, audioOut bool) {
		abs := func(v, m int64) int64 {
			if v < 0 {
				v = -v
			}
			if v < 0 {
				return 0
			}
			return v % m
		}
		const rate = 1 << 30 // above any list price, µ$ per 1M tokens
		p := budget.Price{Input: budget.Money(abs(in, rate)), CachedInput: budget.Money(abs(cached, rate)), CacheWrite: budget.Money(abs(write, rate)),
			Output: budget.Money(abs(out, rate)), Reasoning: budget.Money(abs(reasoning, rate)), InputAudio: budget.Money(abs(inAudio, rate)), OutputAudio: budget.Money(abs(outAudio, rate))}
		if above != 0 {
			p.Above = &budget.Tier{Tokens: abs(above, 2_000_000), Input: budget.Money(abs(tierIn, rate)), Output: budget.Money(abs(tierOut, rate)),
				CachedInput: budget.Money(abs(tierIn/3, rate)), CacheWrite: budget.Money(abs(tierIn/2, rate))}
		}
		const tokens = 10_000_000
		// The bound: in input tokens, audio of them audio, out output.
		bIn := abs(estIn, tokens)
		bAudio, bOut := abs(estAudio, bIn+1), abs(estOut, tokens)
		// A usage within it: at most bIn-bAudio of text input (cached,
		// written or not), at most bAudio of audio, audio output only
		// when asked for.
		text := abs(actIn, bIn-bAudio+1)
		u := budget.Usage{InputAudioTokens: abs(actAudio, bAudio+1), OutputTokens: abs(actOut, bOut+1)}
		u.InputTokens = text + u.InputAudioTokens
		u.CachedInputTokens = abs(actCached, text+1)
		u.CacheWriteTokens = abs(actWrite, text-u.CachedInputTokens+1)
		u.ReasoningTokens = abs(actReasoning, u.OutputTokens+1)
		if audioOut {
			u.OutputAudioTokens = abs(actAudio, u.OutputTokens-u.ReasoningTokens+1)
		}
		cost, err := p.Cost(u)
		if err != nil {
			t.Fatalf("usage %+v: %v", u, err)
		}
		limit, err := p.BoundCost(bIn, bAudio, bOut, audioOut)
		if err != nil {
			t.Fatal(err)
		}
		if cost > limit {
			t.Fatalf("usage %+v costs %v, more than the bound (%d in, %d audio, %d out) at %v", u, cost, bIn, bAudio, bOut, limit)
		}
	})
}

// A one-hour cache write bills at its own rate, the rest of the writes at
// the five minutes'; a request that writes nothing for an hour is bounded
// without the hour's rate; an hour never costs less than five minutes.
func TestCacheWritesByTTL(t *testing.T) {
	p := budget.Price{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000}
	u := budget.Usage{InputTokens: 4096, CachedInputTokens: 1800, CacheWriteTokens: 248, CacheWrite1hTokens: 100, OutputTokens: 503}
	// 2048 × 3 + 1800 × 0.3 + 148 × 3.75 + 100 × 6 + 503 × 15 µ$, each part rounded up
	if c, err := p.Cost(u); err != nil || c != 6144+540+555+600+7545 {
		t.Fatalf("cost %d %v", c, err)
	}
	if c, _ := p.BoundCost(1000, 0, 0, false); c != 6000 {
		t.Fatalf("bound with an hour's writes possible: %d, want 1000 × $6/M", c)
	}
	if c, _ := p.WithoutHourCacheWrites().BoundCost(1000, 0, 0, false); c != 3750 {
		t.Fatalf("bound without: %d, want 1000 × $3.75/M", c)
	}
	low := p
	low.CacheWrite1h = 1_000_000
	if c, _ := low.Cost(budget.Usage{InputTokens: 100, CacheWriteTokens: 100, CacheWrite1hTokens: 100}); c != 375 {
		t.Fatalf("an hour priced below five minutes charged %d, want 375", c)
	}
	if err := (budget.Usage{InputTokens: 100, CacheWriteTokens: 10, CacheWrite1hTokens: 11}).Validate(); err == nil {
		t.Fatal("more one-hour writes than writes validated")
	}
}

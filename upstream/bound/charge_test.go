package bound_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// A figure the upstream left out of its usage is never charged as 0 where
// 0 charges less than the truth could be: the input and the output at the
// request's bound, a dearer part of them (cache writes, reasoning, audio)
// at the whole. Each is named in Unreported.
func TestChargeNeverReadsAMissingFigureAsZero(t *testing.T) {
	m := model(t, "o200k_base")
	p, err := prepare(t, m, bound.Chat, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	price := budget.Price{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, Output: 15_000_000}
	all := convert.HasInput | convert.HasOutput | convert.HasCachedInput | convert.HasCacheWrite | convert.HasReasoning | convert.HasInputAudio | convert.HasOutputAudio
	for _, tc := range []struct {
		desc       string
		nocache    bool // the request marked nothing for caching
		usage      convert.Usage
		want       budget.Usage
		unreported []string
	}{
		{"all reported", false, convert.Usage{Input: 8, Output: 20, Has: all},
			budget.Usage{InputTokens: 8, OutputTokens: 20}, nil},
		{"no output", false, convert.Usage{Input: 8, Has: all &^ convert.HasOutput},
			budget.Usage{InputTokens: 8, OutputTokens: p.MaxOutputTokens, Estimated: true}, []string{"output_tokens"}},
		{"no input", false, convert.Usage{Output: 20, Has: all &^ convert.HasInput},
			budget.Usage{InputTokens: p.InputTokens, OutputTokens: 20, Estimated: true}, []string{"input_tokens"}},
		{"no cache writes, which cost more than input", false, convert.Usage{Input: 8, CachedInput: 2, Output: 20, Has: all &^ convert.HasCacheWrite},
			budget.Usage{InputTokens: 8, CachedInputTokens: 2, CacheWriteTokens: 6, OutputTokens: 20, Estimated: true}, []string{"cache_write_tokens"}},
		{"no cached reads, which cost less: none", false, convert.Usage{Input: 8, Output: 20, Has: all &^ convert.HasCachedInput},
			budget.Usage{InputTokens: 8, OutputTokens: 20}, nil},
		{"no cache writes where nothing was marked for caching: none", true, convert.Usage{Input: 8, Output: 20, Has: all &^ convert.HasCacheWrite},
			budget.Usage{InputTokens: 8, OutputTokens: 20}, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p.CacheWrites = !tc.nocache // as a Messages request with cache_control
			got := p.Charge(tc.usage, price)
			if !slices.Equal(got.Unreported, tc.unreported) {
				t.Fatalf("unreported %v, want %v", got.Unreported, tc.unreported)
			}
			got.Unreported = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("charged %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			reported, _ := price.Cost(budget.Usage{InputTokens: tc.usage.Input, CachedInputTokens: tc.usage.CachedInput, OutputTokens: tc.usage.Output})
			if cost, _ := price.Cost(got); cost < reported {
				t.Fatalf("charged %d µ$, below the %d of the figures reported", cost, reported)
			}
		})
	}
}

// With Anthropic's context-1m beta a request may pass 200k input tokens,
// and is then billed at the long-context price: it is reserved at the
// model's long-context tier, and refused on a model that has none.
func TestLongContextIsPricedAtItsTier(t *testing.T) {
	m := model(t, "o200k_base")
	m.TokenRatio = 100_000 // a few words bound past 200k tokens
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a few words"}]}`
	req, err := bound.Parse(bound.Messages, []byte(body), map[string][]string{"Anthropic-Beta": {"context-1m-2025-08-07"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := req.Prepare(m, native{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.LongContext || p.InputTokens <= 200_000 {
		t.Fatalf("long context %v, input bound %d", p.LongContext, p.InputTokens)
	}
	flat := budget.Price{Input: 3_000_000, Output: 15_000_000}
	_, _, err = p.Cost(flat, 0)
	refusal(t, err, "anthropic-beta")
	tiered := flat
	tiered.Above = &budget.Tier{Tokens: 200_000, Input: 6_000_000, Output: 22_500_000}
	c, _, err := p.Cost(tiered, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := (budget.Price{Input: 6_000_000, Output: 22_500_000}).Cost(budget.Usage{InputTokens: p.InputTokens, OutputTokens: 10}); c != want {
		t.Fatalf("reserved %d µ$, want %d at the long-context rates", c, want)
	}
}

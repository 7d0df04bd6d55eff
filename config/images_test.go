package config

import "testing"

// Claude models up to Opus 4.6, Sonnet 4.x and Haiku 4.x scale an image to
// 1.15 megapixels (1,600 tokens); later ones take 2,576 px (4,787), and a
// Claude not known to be older is bounded as a later one.
func TestClaudeImageBoundByModel(t *testing.T) {
	for model, want := range map[string]int64{
		"claude-3-7-sonnet-20250219":               1600,
		"claude-4-opus-20250514":                   1600,
		"claude-opus-4-20250514":                   1600,
		"claude-opus-4-1":                          1600,
		"claude-opus-4-6-20260205":                 1600,
		"claude-sonnet-4-5@20250929":               1600,
		"anthropic.claude-haiku-4-5-20251001-v1:0": 1600,
		"us.anthropic.claude-opus-4-20250514-v1:0": 1600,
		"claude-opus-4@20250514":                   1600,
		"claude-sonnet-4-6":                        1600,
		"claude-opus-4-7":                          4787,
		"claude-opus-4-8":                          4787,
		"claude-opus-5":                            4787,
		"claude-sonnet-5":                          4787,
		"claude-haiku-5-5":                         4787,
		"claude-fable-5":                           4787,
		"anthropic/claude-mythos":                  4787,
		"claude-next-generation":                   4787,
	} {
		if got, _, ok := imageBound(model); !ok || got != want {
			t.Errorf("%s: image bound %d, want %d", model, got, want)
		}
	}
}

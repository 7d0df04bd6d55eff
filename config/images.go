package config

import "strings"

// pdfPageBound is a model family's figure for one page of a PDF, in input
// tokens, or 0 where there is none:
//
//   - Claude and OpenAI's models bill each page as an image of it plus
//     its extracted text: the family's image bound plus 1,500 tokens of
//     text (a dense page of 10-point text is about 800 words). Measured
//     on Claude, a page of text or a table bills 2,100 to 2,500.
//   - Gemini bills a page as an image at its media resolution, text
//     included: 560 tokens at the default for PDFs, 1,120 at high.
//
// A page of very small print can hold more text than that: where
// documents are that dense, set pdf_page_tokens.
func pdfPageBound(model string) int64 {
	if strings.Contains(strings.ToLower(model), "gemini") {
		return 1120
	}
	if high, _, ok := imageBound(model); ok {
		return high + 1500
	}
	return 0
}

// imageBound is the most one input image can cost on a model family, in
// input tokens, and its low-detail figure (0 where low detail costs the
// same). These are the providers' own formulas taken at their largest image:
//
//   - OpenAI tile models (gpt-4o, gpt-4.1, gpt-4.5, gpt-4-turbo): 85 + 170
//     per 512 px tile, at most 8 tiles (an image is fitted into 2048 px and
//     its short side scaled to 768 px): 1,445; low detail 85. gpt-4o-mini
//     bills the same tiles at 2,833 + 5,667 each: 48,169; low 2,833. o1 and
//     o3: 75 + 150 a tile: 1,275; low 75.
//   - OpenAI patch models: 32 px patches, at most 1,536, times the model's
//     multiplier (gpt-4.1-mini and gpt-5 mini models 1.62, nano models 2.46,
//     o4-mini and codex-mini 1.72); detail has no effect. Full gpt-5 models
//     take up to 2,500 patches at 1.2: 3,000.
//   - Claude up to Opus 4.6, Sonnet 4.x and Haiku 4.x: an image is scaled
//     to at most 1.15 megapixels, about 1,600 tokens. Later ones (Opus 4.7
//     and on, Sonnet 5, Haiku 5.5, Fable — and any Claude not known to be
//     older) take images of up to 2,576 px: 28 px patches, at most 4,784,
//     and 3 tokens for the image block: 4,787.
//   - Gemini: 258 tokens an image of at most 384 px a side, else 258 per
//     768 px tile of the image scaled to fit 3,072 px: at most 16 tiles,
//     4,128 (Gemini 3's media resolutions stay below that: 1,120 high).
//
// ok is false for a model of no known family: its image_tokens must be set,
// or images sent to it are refused.
func imageBound(model string) (high, low int64, ok bool) {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:] // "openai/gpt-4o", "anthropic.claude-…"
	}
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(m, x) {
				return true
			}
		}
		return false
	}
	switch {
	case has("claude") && standardClaude(m):
		return 1600, 0, true
	case has("claude"):
		return 4787, 0, true
	case has("gemini"):
		return 4128, 0, true
	case has("gpt-4o-mini"):
		return 48169, 2833, true
	case has("gpt-5") && has("nano"), has("gpt-4.1-nano"):
		return 3779, 0, true
	case has("gpt-5") && has("mini"), has("gpt-4.1-mini"):
		return 2489, 0, true
	case has("o4-mini", "codex-mini"):
		return 2642, 0, true
	case has("gpt-5"):
		return 3000, 0, true
	case has("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-4-turbo", "gpt-4-vision"):
		return 1445, 85, true
	case strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"):
		return 1275, 75, true
	}
	return 0, 0, false
}

// standardClaude reports whether the Claude model m (lower case) is one of
// those that scale images to 1.15 megapixels: Claude 3, Claude 4 up to
// Opus 4.6, Sonnet 4.x, Haiku 4.x. A model not known to be one is taken as
// high-resolution: its bound is the larger.
func standardClaude(m string) bool {
	for _, family := range []string{"claude-3", "claude-4-", "sonnet-4", "haiku-4", "haiku-3"} {
		if strings.Contains(m, family) {
			return true
		}
	}
	// Opus 4, 4.1, 4.5, 4.6 — "opus-4-2025…" is Opus 4 with its date.
	for _, v := range []string{"opus-4-1", "opus-4-5", "opus-4-6", "opus-4-2"} {
		if strings.Contains(m, v) {
			return true
		}
	}
	return strings.HasSuffix(m, "opus-4") || strings.Contains(m, "opus-4@") || strings.Contains(m, "opus-4-v")
}

package upstream

import (
	"net/http"
	"net/url"

	"github.com/tollgate-dev/tollgate/upstream/bound"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// geminiBase is the Gemini API's root.
const geminiBase = "https://generativelanguage.googleapis.com/v1beta"

// gemini is Google's Gemini API: generateContent and
// streamGenerateContent (as server-sent events), the key in
// x-goog-api-key. Clients reach it in their own format, translated.
type gemini struct{ base, key string }

func newGemini(base, key string) gemini {
	if base == "" {
		base = geminiBase
	}
	return gemini{base: base, key: key}
}

func (gemini) Kind() string { return "gemini" }

func (gemini) Serves(bound.Endpoint) bool { return false }

func (p gemini) URL(_ bound.Endpoint, model string, stream bool) string {
	return geminiURL(p.base+"/models/", model, stream)
}

// geminiURL is a generateContent URL below prefix.
func geminiURL(prefix, model string, stream bool) string {
	if stream {
		return prefix + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	}
	return prefix + url.PathEscape(model) + ":generateContent"
}

func (p gemini) Header(out, _ http.Header) {
	if p.key != "" {
		out.Set("X-Goog-Api-Key", p.key)
	}
}

func (gemini) Wire(string) convert.Wire { return convert.Gemini }

func (gemini) Encode(c *convert.Chat, _ *bound.Model) ([]byte, error) { return convert.ToGemini(c) }

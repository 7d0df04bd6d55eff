package gateway

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/upstream"
)

// CountTokens answers Anthropic's count_tokens for req with the gateway's
// own bound on the request's input tokens: what it would reserve for
// them at the dearest deployment of the model, images and PDF pages
// included. No upstream is called and nothing is reserved, so the answer
// is free, works for every model whatever its provider, and is never
// below what the request will be billed — an upper bound, not the
// provider's exact count. The body is a Messages request; max_tokens may
// be left out.
func (g *Gateway) CountTokens(req Request) (int64, error) {
	cl := g.begin(req)
	body, err := req.Body()
	if err != nil {
		return 0, err
	}
	if !gjson.GetBytes(body, "max_tokens").Exists() {
		if body, err = sjson.SetBytes(body, "max_tokens", 1); err != nil {
			return 0, &upstream.RequestError{Message: "the body must be a JSON object"}
		}
	}
	if err := g.prepare(cl, upstream.Messages, body); err != nil {
		return 0, err
	}
	var n int64
	for _, p := range cl.plans {
		n = max(n, p.prep.InputTokens)
	}
	return n, nil
}

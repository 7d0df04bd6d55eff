package gateway

import (
	"cmp"

	"github.com/tollgate-dev/tollgate/upstream/bound"
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
	r, err := bound.Parse(bound.Messages, body, req.Header)
	if err != nil {
		return 0, err
	}
	rt, ok := cl.settings.routes[r.Model]
	switch {
	case !ok:
		return 0, &ModelError{Model: r.Model}
	case !cl.principal.Allows(r.Model):
		return 0, &ModelError{Model: r.Model, Allowed: true}
	}
	var n int64
	var first error
	for _, d := range rt.deployments {
		in, err := r.InputTokens(&d.model)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		n = max(n, in)
	}
	if n == 0 && first != nil {
		return 0, first
	}
	return n, nil
}

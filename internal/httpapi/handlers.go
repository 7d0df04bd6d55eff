package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/httpx"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// proxy serves one LLM endpoint: decode the request into the gateway's
// steps — Admit (estimate, reserve), Forward (relay the answer as it
// arrives), Finish (settle after the response) — and encode what they
// refuse through the error table.
func (s *Server) proxy(ep bound.Endpoint, route string) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := s.request(c, route)
		cl, err := s.gw.Admit(c.Request().Context(), ep, req)
		return s.serve(c, cl, err)
	}
}

// countTokens answers Anthropic's POST /v1/messages/count_tokens with the
// gateway's bound on the request's input tokens (Gateway.CountTokens); the
// X-Tollgate-Count header says so.
func (s *Server) countTokens(c echo.Context) error {
	n, err := s.gw.CountTokens(s.request(c, "/v1/messages/count_tokens"))
	if err != nil {
		s.countRefusal(err, principalOf(c).Team)
		return err
	}
	c.Response().Header().Set("X-Tollgate-Count", "bound")
	return c.JSON(http.StatusOK, map[string]int64{"input_tokens": n})
}

// paid serves the paid route name, mounted at prefix, through the same
// steps.
func (s *Server) paid(name, prefix string) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := s.request(c, prefix)
		cl, err := s.gw.AdmitPaid(c.Request().Context(), name, req)
		return s.serve(c, cl, err)
	}
}

// request is what the gateway needs of c's request; its id is on the
// response from the start, refusals included.
func (s *Server) request(c echo.Context, route string) gateway.Request {
	r, st := c.Request(), settingsOf(c)
	req := gateway.Request{ID: gateway.NewID(), Principal: principalOf(c), Settings: st, Route: route,
		User: httpx.Get(r.Header, st.UserHeader()), IP: clientIP(c, st),
		Method: r.Method, Target: r.URL.RequestURI(), Signature: httpx.Get(r.Header, SignatureHeader), Header: r.Header}
	req.Body = func() ([]byte, error) { return readBody(c, st.Config().MaxBodyBytes) }
	c.Response().Header()["X-Tollgate-Request-Id"] = []string{req.ID} // canonical: Set would canonicalise it again
	return req
}

// serve runs an admitted call (admitErr nil) to its end: the limit
// headers, the upstream's answer, the settlement after it.
func (s *Server) serve(c echo.Context, cl *gateway.Call, admitErr error) error {
	defer s.gw.Done(cl)
	if admitErr != nil {
		s.countRefusal(admitErr, cl.Team())
		return admitErr
	}
	h := c.Response().Header()
	writeLimitHeaders(h, cl.Limits(), cl.Reserved(), settingsOf(c).Config().Server.LimitHeaders == config.LimitHeadersAll)
	if k := cl.Clamped(); k != nil {
		h.Set("X-Tollgate-Output-Clamped", fmt.Sprintf("%s=%d; requested=%d", k.Field, k.Granted, k.Requested))
	}
	err := s.gw.Forward(c.Request().Context(), cl, c.Response())
	s.gw.Finish(c.Request().Context(), cl)
	if err != nil && gateway.IsUpstreamRefused(err) {
		s.countRefusal(err, cl.Team())
	}
	return err
}

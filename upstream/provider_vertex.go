package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/upstream/bound"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// vertexScope is the OAuth scope Vertex AI's calls need.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertex is Google Cloud's Vertex AI: Gemini models (generateContent) and
// Anthropic's Claude (rawPredict, Anthropic's Messages wire with the
// model in the URL), authorised with a service account's OAuth token
// (golang.org/x/oauth2, refreshed before it lapses).
type vertex struct {
	base, project, location string
	tokens                  oauth2.TokenSource
}

func newVertex(base string, c ProviderConfig) (*vertex, error) {
	if c.Project == "" || c.Location == "" {
		return nil, errors.New("upstream: a vertex upstream needs its project and location")
	}
	if base == "" {
		host := c.Location + "-aiplatform.googleapis.com"
		if c.Location == "global" {
			host = "aiplatform.googleapis.com"
		}
		base = "https://" + host + "/v1"
	}
	if len(c.Credentials) == 0 {
		return nil, errors.New("upstream: a vertex upstream needs a service account's credentials")
	}
	jwt, err := google.JWTConfigFromJSON(c.Credentials, vertexScope)
	if err != nil {
		return nil, fmt.Errorf("upstream: reading the vertex service account: %w", err)
	}
	return &vertex{base: base, project: c.Project, location: c.Location,
		tokens: oauth2.ReuseTokenSource(nil, jwt.TokenSource(context.Background()))}, nil
}

func (*vertex) Kind() string { return "vertex" }

func (*vertex) Serves(bound.Endpoint) bool { return false }

func (p *vertex) URL(_ bound.Endpoint, model string, stream bool) string {
	prefix := p.base + "/projects/" + url.PathEscape(p.project) + "/locations/" + url.PathEscape(p.location) + "/publishers/"
	if p.Wire(model) == convert.Anthropic {
		op := ":rawPredict"
		if stream {
			op = ":streamRawPredict"
		}
		return prefix + "anthropic/models/" + url.PathEscape(model) + op
	}
	return geminiURL(prefix+"google/models/", model, stream)
}

func (*vertex) Header(http.Header, http.Header) {}

// Sign sets the service account's bearer token.
func (p *vertex) Sign(_ context.Context, req *http.Request, _ []byte) error {
	tok, err := p.tokens.Token()
	if err != nil {
		return fmt.Errorf("upstream: getting a vertex token: %w", err)
	}
	tok.SetAuthHeader(req)
	return nil
}

// Wire is Anthropic's for Claude models, Gemini's for the rest.
func (*vertex) Wire(model string) convert.Wire {
	if strings.HasPrefix(model, "claude") {
		return convert.Anthropic
	}
	return convert.Gemini
}

// Encode writes Claude's requests as Vertex takes them: no model in the
// body, its own anthropic_version.
func (p *vertex) Encode(c *convert.Chat, m *bound.Model) ([]byte, error) {
	if p.Wire(m.Name) == convert.Anthropic {
		cc := *c
		cc.Model = ""
		return convert.ToAnthropic(&cc, map[string]any{"anthropic_version": "vertex-2023-10-16"})
	}
	return convert.ToGemini(c)
}

package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/upstream/bound"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Provider is one upstream's dialect of the wire: where a request goes
// and how it is authorised. What the answer looks like (its usage, its
// stream, the event that ends a stream past its bound) is the endpoint's
// (Wire, NewMeter, OverrunEvent): a provider serves the
// endpoints whose wire it speaks (Serves).
type Provider interface {
	// Kind is the config's name of the dialect.
	Kind() string
	// Serves reports whether the provider answers requests of ep.
	Serves(ep bound.Endpoint) bool
	// URL is where a request for model at ep goes (a stream's, where the
	// provider streams elsewhere).
	URL(ep bound.Endpoint, model string, stream bool) string
	// Header sets on out the headers that carry the upstream's key and
	// the dialect's version, taking from the client's in what the dialect
	// lets a client choose (Anthropic's version and betas).
	Header(out, in http.Header)
}

// ProviderConfig is what a provider is built from.
type ProviderConfig struct {
	// Kind is "openai" (the default), "azure", "anthropic", "gemini",
	// "vertex" or "bedrock".
	Kind    string
	BaseURL string
	APIKey  string
	// APIVersion and Deployments (model → deployment) are Azure's.
	APIVersion  string
	Deployments map[string]string
	// Region, AccessKeyID, SecretKey and SessionToken are Bedrock's (AWS
	// SigV4; or APIKey, a Bedrock API key, as a bearer token).
	Region, AccessKeyID, SecretKey, SessionToken string
	// Project, Location and Credentials (a service account's JSON key)
	// are Vertex AI's.
	Project, Location string
	Credentials       []byte
}

// NewProvider returns the provider of c.Kind.
func NewProvider(c ProviderConfig) (Provider, error) {
	base := strings.TrimSuffix(c.BaseURL, "/")
	switch c.Kind {
	case "", "openai":
		return newOpenAI(base, c.APIKey), nil
	case "azure":
		return azure{openAI: newOpenAI(base, c.APIKey), version: c.APIVersion, deployments: c.Deployments}, nil
	case "anthropic":
		return anthropicProvider{base: base, key: c.APIKey}, nil
	case "gemini":
		return newGemini(base, c.APIKey), nil
	case "bedrock":
		return newBedrock(base, c)
	case "vertex":
		return newVertex(base, c)
	}
	return nil, fmt.Errorf("upstream: unknown provider kind %q", c.Kind)
}

// openAI is any OpenAI-compatible API: bearer key, paths below the base.
type openAI struct {
	base, key string
	bearer    string // "Bearer <key>", made once: it is sent at every request
}

func newOpenAI(base, key string) openAI { return openAI{base: base, key: key, bearer: "Bearer " + key} }

func (openAI) Kind() string { return "openai" }

func (openAI) Serves(ep bound.Endpoint) bool { return ep != bound.Messages }

func (openAI) Wire(string) convert.Wire { return convert.OpenAI }

// Encode writes a translated request (an Anthropic client's) in Chat
// Completions, with the cap in the field m's server honours and, for a
// stream, the usage asked for where it must be.
func (openAI) Encode(c *convert.Chat, m *bound.Model) ([]byte, error) {
	ask := m.StreamUsage == "" || m.StreamUsage == "stream_options"
	return convert.ToOpenAI(c, m.CapField, ask)
}

func (p openAI) URL(ep bound.Endpoint, _ string, _ bool) string { return p.base + ep.Path() }

func (p openAI) Header(out, _ http.Header) {
	if p.key != "" {
		out.Set("Authorization", p.bearer)
	}
}

// azure is Azure OpenAI: a deployment per model in the path, the API
// version in the query, the key in Api-Key.
type azure struct {
	openAI
	version     string
	deployments map[string]string
}

func (azure) Kind() string { return "azure" }

func (p azure) URL(ep bound.Endpoint, model string, _ bool) string {
	deployment := p.deployments[model]
	if deployment == "" {
		deployment = model
	}
	return p.base + "/deployments/" + url.PathEscape(deployment) + ep.Path() + "?api-version=" + url.QueryEscape(p.version)
}

func (p azure) Header(out, _ http.Header) {
	if p.key != "" {
		out.Set("Api-Key", p.key)
	}
}

// anthropicProvider is Anthropic's API: Messages only, the key in
// X-Api-Key, and a version the client may choose (2023-06-01 by default;
// bound.Parse checks it). Its betas are the prepared request's
// (bound.Prepared.Betas).
type anthropicProvider struct{ base, key string }

func (anthropicProvider) Kind() string { return "anthropic" }

func (anthropicProvider) Serves(ep bound.Endpoint) bool { return ep == bound.Messages }

func (anthropicProvider) Wire(string) convert.Wire { return convert.Anthropic }

// Encode writes a translated request (an OpenAI client's) as Messages.
func (anthropicProvider) Encode(c *convert.Chat, _ *bound.Model) ([]byte, error) {
	return convert.ToAnthropic(c, nil)
}

func (p anthropicProvider) URL(ep bound.Endpoint, _ string, _ bool) string { return p.base + ep.Path() }

func (p anthropicProvider) Header(out, in http.Header) {
	version := in.Get("Anthropic-Version")
	if version == "" {
		version = "2023-06-01"
	}
	out.Set("Anthropic-Version", version)
	if p.key != "" {
		out.Set("X-Api-Key", p.key)
	}
}

// Signer is a provider that authorises each request by its content (AWS
// SigV4) or with a credential it refreshes (OAuth): after Header, before
// the request is sent.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// EndpointOf is the endpoint a request in wire w goes to, where the
// provider's URL depends on it.
func EndpointOf(w convert.Wire) bound.Endpoint {
	if w == convert.Anthropic {
		return bound.Messages
	}
	return bound.Chat
}

// Wire is the wire of an answer of endpoint e, as its usage is read.
func Wire(e bound.Endpoint) convert.Wire {
	switch e {
	case bound.Messages:
		return convert.Anthropic
	case bound.Responses:
		return convert.Responses
	}
	return convert.OpenAI
}

// NewMeter returns the meter of a stream of e that keeps at most maxText
// bytes of output.
func NewMeter(e bound.Endpoint, maxText int) *StreamMeter {
	switch e {
	case bound.Messages:
		return NewAnthropicStreamMeter(maxText)
	case bound.Responses:
		return NewResponsesStreamMeter(maxText)
	}
	return NewStreamMeter(maxText)
}

// OverrunEvent is the last event of a stream of e that the gateway ends
// because the upstream passed the output bound: the dialect's error event
// carrying msg and the code output_limit_reached (and, for OpenAI's chat
// and completions, the [DONE] its clients wait for).
func OverrunEvent(e bound.Endpoint, msg string) string {
	switch e {
	case bound.Messages:
		return fmt.Sprintf("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":%q,\"code\":\"output_limit_reached\"}}\n\n", msg)
	case bound.Responses:
		return fmt.Sprintf("event: error\ndata: {\"type\":\"error\",\"code\":\"output_limit_reached\",\"message\":%q,\"param\":null}\n\n", msg)
	}
	return fmt.Sprintf("data: {\"error\":{\"message\":%q,\"type\":\"server_error\",\"code\":\"output_limit_reached\"}}\n\ndata: [DONE]\n\n", msg)
}

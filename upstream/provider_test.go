package upstream

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Each provider sends a request where its API expects it, with the key
// where it reads it, and serves only the endpoints whose wire it speaks.
func TestProvidersURLsHeadersAndEndpoints(t *testing.T) {
	in := http.Header{"Anthropic-Beta": {"tools-2024"}}
	for _, c := range []struct {
		cfg            ProviderConfig
		url            string
		header, value  string
		serves, denies bound.Endpoint
	}{
		{ProviderConfig{BaseURL: "https://api.openai.com/v1/", APIKey: "k"}, "https://api.openai.com/v1/chat/completions", "Authorization", "Bearer k", bound.Chat, bound.Messages},
		{ProviderConfig{Kind: "azure", BaseURL: "https://x.openai.azure.com/openai", APIKey: "k", APIVersion: "2024-10-21",
			Deployments: map[string]string{"gpt-4o": "prod gpt"}}, "https://x.openai.azure.com/openai/deployments/prod%20gpt/chat/completions?api-version=2024-10-21", "Api-Key", "k", bound.Chat, bound.Messages},
		{ProviderConfig{Kind: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: "k"}, "https://api.anthropic.com/v1/messages", "X-Api-Key", "k", bound.Messages, bound.Chat},
	} {
		p, err := NewProvider(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ep := c.serves
		if got := p.URL(ep, "gpt-4o", false); got != c.url {
			t.Errorf("%s: URL %s, want %s", p.Kind(), got, c.url)
		}
		out := http.Header{}
		p.Header(out, in)
		if got := out.Get(c.header); got != c.value {
			t.Errorf("%s: %s = %q, want %q (headers %v)", p.Kind(), c.header, got, c.value, out)
		}
		if !p.Serves(c.serves) || p.Serves(c.denies) {
			t.Errorf("%s serves %v: %v, %v: %v", p.Kind(), c.serves, p.Serves(c.serves), c.denies, p.Serves(c.denies))
		}
		if p.Kind() == "anthropic" && out.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("anthropic: version %v", out)
		}
		// The client's betas go only as the prepared request checked them
		// (bound.Prepared.Betas): a provider passes none on.
		if out.Get("Anthropic-Beta") != "" {
			t.Errorf("%s passed on the client's anthropic-beta", p.Kind())
		}
	}
	if _, err := NewProvider(ProviderConfig{Kind: "cohere"}); err == nil {
		t.Fatal("an unknown kind is an error")
	}
}

// Each endpoint reads its own wire: usage from a JSON answer, a stream's
// meter, and an overrun event its clients parse as an error.
func TestEndpointsReadTheirOwnWire(t *testing.T) {
	answers := map[bound.Endpoint]string{
		bound.Chat:      `{"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		bound.Messages:  `{"type":"message","usage":{"input_tokens":3,"output_tokens":4}}`,
		bound.Responses: `{"object":"response","usage":{"input_tokens":3,"output_tokens":4}}`,
	}
	for ep, body := range answers {
		u, err := convert.AnswerUsage(Wire(ep), []byte(body))
		if err != nil || u.Input != 3 || u.Output != 4 {
			t.Errorf("%v: usage %+v %v", ep, u, err)
		}
		if m := NewMeter(ep, 100); m == nil || m.anthropic != (ep == bound.Messages) || m.responses != (ep == bound.Responses) {
			t.Errorf("%v: meter %+v", ep, m)
		}
		ev := OverrunEvent(ep, `too "long"`)
		data := ev[strings.Index(ev, "data: ")+6:]
		data = data[:strings.Index(data, "\n")]
		var v map[string]any
		if err := json.Unmarshal([]byte(data), &v); err != nil || !strings.Contains(data, "output_limit_reached") {
			t.Errorf("%v: overrun event %q: %v", ep, ev, err)
		}
		if (ep == bound.Chat) != strings.HasSuffix(ev, "data: [DONE]\n\n") {
			t.Errorf("%v: [DONE] %q", ep, ev)
		}
	}
}

package gateway

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
)

// TestURLsRequest: a request built from a parsed-once URL is the one
// http.NewRequest builds from the provider's URL string — URL, Host,
// body — for every endpoint, model and streaming flag, and it has its
// own URL: changing one request's does not reach the next.
func TestURLsRequest(t *testing.T) {
	for _, pc := range []upstream.ProviderConfig{
		{Kind: "azure", BaseURL: "https://res.openai.azure.com/openai/", APIKey: "k", APIVersion: "2024-10-21", Deployments: map[string]string{"gpt-4o": "prod 4o"}},
		{Kind: "gemini", BaseURL: "https://generativelanguage.googleapis.com:/v1beta", APIKey: "k"},
	} {
		p, err := upstream.NewProvider(pc)
		if err != nil {
			t.Fatal(err)
		}
		var c urls
		for range 2 {
			for _, k := range []urlKey{{upstream.Chat, "gpt-4o", false}, {upstream.Chat, "gpt-4o", true}, {upstream.Chat, "gemini-2.0-flash", true}, {upstream.Embeddings, "x/y", false}} {
				if !p.Serves(k.ep) {
					continue
				}
				want, err := http.NewRequest(http.MethodPost, p.URL(k.ep, k.model, k.stream), nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.request(context.Background(), p, k, []byte(`{"a":1}`))
				if err != nil {
					t.Fatal(err)
				}
				if got.URL.String() != want.URL.String() || got.Host != want.Host || *got.URL != *want.URL {
					t.Errorf("%s %+v: URL %q host %q, NewRequest's %q %q", pc.Kind, k, got.URL, got.Host, want.URL, want.Host)
				}
				if b, _ := io.ReadAll(got.Body); string(b) != `{"a":1}` || got.ContentLength != 7 || got.GetBody == nil {
					t.Errorf("%s %+v: body %q, length %d", pc.Kind, k, b, got.ContentLength)
				}
				got.URL.Path, got.URL.RawQuery = "/changed", "x=1"
			}
		}
	}
}

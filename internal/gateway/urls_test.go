package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// TestURLsRequest: a request built from a parsed-once URL is the one
// http.NewRequestWithContext builds from the provider's URL string — URL,
// Host, method, protocol, headers, context, body and GetBody, an empty
// body too — for every endpoint, model and streaming flag, and it has its
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
			for _, k := range []urlKey{{bound.Chat, "gpt-4o", false}, {bound.Chat, "gpt-4o", true}, {bound.Chat, "gemini-2.0-flash", true}, {bound.Embeddings, "x/y", false}} {
				if !p.Serves(k.ep) {
					continue
				}
				for _, body := range []string{`{"a":1}`, ""} {
					ctx := context.WithValue(context.Background(), urlKey{}, body)
					want, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL(k.ep, k.model, k.stream), bytes.NewReader([]byte(body)))
					if err != nil {
						t.Fatal(err)
					}
					got, err := c.request(ctx, p, k, []byte(body))
					if err != nil {
						t.Fatal(err)
					}
					if got.URL.String() != want.URL.String() || got.Host != want.Host || *got.URL != *want.URL {
						t.Errorf("%s %+v: URL %q host %q, NewRequest's %q %q", pc.Kind, k, got.URL, got.Host, want.URL, want.Host)
					}
					if got.Method != want.Method || got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
						got.Header == nil || len(got.Header) != 0 || got.Context() != ctx || got.ContentLength != want.ContentLength ||
						(got.Body == http.NoBody) != (want.Body == http.NoBody) {
						t.Errorf("%s %+v body %q: %+v, NewRequestWithContext's %+v", pc.Kind, k, body, got, want)
					}
					for i, r := range []io.ReadCloser{got.Body, must(got.GetBody()), must(got.GetBody())} {
						if b, _ := io.ReadAll(r); string(b) != body {
							t.Errorf("%s %+v: body %d reads %q, sent %q", pc.Kind, k, i, b, body)
						}
					}
					got.URL.Path, got.URL.RawQuery = "/changed", "x=1"
				}
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/upstream/bound"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

func TestGeminiURLsAndKey(t *testing.T) {
	p, err := NewProvider(ProviderConfig{Kind: "gemini", APIKey: "g-key"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.URL(bound.Chat, "gemini-2.5-pro", false); got != "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent" {
		t.Errorf("URL %s", got)
	}
	if got := p.URL(bound.Chat, "gemini-2.5-pro", true); got != "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse" {
		t.Errorf("stream URL %s", got)
	}
	h := http.Header{}
	p.Header(h, http.Header{"Authorization": {"Bearer client-key"}})
	if h.Get("X-Goog-Api-Key") != "g-key" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
}

// Bedrock's requests are signed with SigV4 by the AWS SDK's signer: a
// request signed again by the same signer, credentials and time carries
// the same signature, and any change of the body breaks it.
func TestBedrockSignsWithSigV4(t *testing.T) {
	p, err := NewProvider(ProviderConfig{Kind: "bedrock", Region: "eu-west-1", AccessKeyID: "AKIDEXAMPLE", SecretKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	b := p.(*bedrock)
	at := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	b.now = func() time.Time { return at }
	url := p.URL(bound.Chat, "anthropic.claude-sonnet-4-5-20250929-v1:0", true)
	if url != "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream" {
		t.Fatalf("URL %s", url)
	}
	body := []byte(`{"messages":[]}`)
	sign := func(body []byte) string {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if err := b.Sign(context.Background(), req, body); err != nil {
			t.Fatal(err)
		}
		return req.Header.Get("Authorization")
	}
	got := sign(body)
	if !strings.HasPrefix(got, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261115/eu-west-1/bedrock/aws4_request") {
		t.Fatalf("Authorization %q", got)
	}
	// The same request signed independently by the SDK verifies it.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, req,
		hashHex(body), "bedrock", "eu-west-1", at); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Authorization") != got {
		t.Fatalf("the SDK signs %q, the provider %q", req.Header.Get("Authorization"), got)
	}
	if sign([]byte(`{"messages":[1]}`)) == got {
		t.Fatal("another body carries the same signature")
	}
	if _, err := NewProvider(ProviderConfig{Kind: "bedrock", Region: "eu-west-1"}); err == nil {
		t.Fatal("a bedrock upstream without credentials was built")
	}
}

// Vertex AI authorises with a service account's OAuth token, asked of the
// account's token endpoint with a signed JWT and reused until it lapses.
func TestVertexUsesAServiceAccountsToken(t *testing.T) {
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		sim.ServeHTTP(w, r)
	}))
	defer tokens.Close()
	account, err := sim.ServiceAccount(tokens.URL + "/token")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProvider(ProviderConfig{Kind: "vertex", Project: "acme-ai", Location: "us-east5", Credentials: account})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.URL(bound.Chat, "claude-sonnet-4-5@20250929", true); got != "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-ai/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict" {
		t.Errorf("Claude's URL %s", got)
	}
	if got := p.URL(bound.Chat, "gemini-2.5-pro", false); got != "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-ai/locations/us-east5/publishers/google/models/gemini-2.5-pro:generateContent" {
		t.Errorf("Gemini's URL %s", got)
	}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "https://x.test", nil)
		if err := p.(*vertex).Sign(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
		if req.Header.Get("Authorization") != "Bearer ya29.simulated" {
			t.Fatalf("Authorization %q", req.Header.Get("Authorization"))
		}
	}
	if asked.Load() != 1 {
		t.Fatalf("the token was asked for %d times, want once and reused", asked.Load())
	}
}

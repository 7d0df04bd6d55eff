package simulated

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/oauth2/google"
)

// The token endpoint grants a token only for an assertion signed with the
// key of an account it issued: a forged one is refused, as Google would.
func TestTokenChecksTheAssertionsSignature(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	other, _ := New(Options{})
	for _, tc := range []struct {
		issuer *Server
		want   string
	}{{s, ""}, {other, "invalid JWT signature"}} {
		account, err := tc.issuer.ServiceAccount(srv.URL + "/token")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := google.JWTConfigFromJSON(account, "https://www.googleapis.com/auth/cloud-platform")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cfg.TokenSource(context.Background()).Token()
		switch {
		case tc.want == "" && (err != nil || tok.AccessToken != vertexToken):
			t.Fatalf("a genuine assertion: %v %+v", err, tok)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Fatalf("a forged assertion: err = %v, want %q", err, tc.want)
		}
	}
}

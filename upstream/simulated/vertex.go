package simulated

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"time"
)

// vertexToken is the access token the simulated Vertex AI issues and
// takes.
const vertexToken = "ya29.simulated"

// ServiceAccount returns a service account's JSON key, with a fresh RSA
// key the server knows, whose tokens come from tokenURL (the server's
// /token). The token endpoint grants a token only for an assertion
// signed with a key it issued this way.
func (s *Server) ServiceAccount(tokenURL string) ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	email := "tollgate@acme-ai.iam.gserviceaccount.com"
	s.mu.Lock()
	if s.accounts == nil {
		s.accounts = map[string]*rsa.PublicKey{}
	}
	s.accounts[email] = &key.PublicKey
	s.mu.Unlock()
	return json.Marshal(map[string]string{"type": "service_account", "project_id": "acme-ai", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "token_uri": tokenURL})
}

// token answers an OAuth JWT-bearer grant with a token, as Google's token
// endpoint does for a service account: the assertion must be an RS256 JWT
// signed by a known account, for this audience, not expired.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	if err := s.checkAssertion(r.Form.Get("assertion"), "http://"+r.Host+r.URL.Path); err != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": vertexToken, "token_type": "Bearer", "expires_in": 3600})
}

// checkAssertion says what is wrong with a JWT assertion, or "".
func (s *Server) checkAssertion(jwt, audience string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "not a JWT"
	}
	var claims struct {
		Iss, Aud, Scope string
		Exp             int64
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return "unreadable claims"
	}
	s.mu.Lock()
	key := s.accounts[claims.Iss]
	s.mu.Unlock()
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch {
	case key == nil:
		return "unknown service account " + claims.Iss
	case err != nil || rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil:
		return "invalid JWT signature"
	case claims.Aud != audience:
		return "wrong audience " + claims.Aud
	case claims.Exp < time.Now().Unix():
		return "expired assertion"
	case claims.Scope == "":
		return "no scope"
	}
	return ""
}

// vertexAnthropic answers Claude on Vertex AI: rawPredict and
// streamRawPredict take Anthropic's Messages body without its model (in
// the URL) and with Vertex's anthropic_version.
func (s *Server) vertexAnthropic(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var v map[string]any
	if json.Unmarshal(body, &v) != nil || v["anthropic_version"] != "vertex-2023-10-16" || v["model"] != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version must be vertex-2023-10-16, and the model goes in the URL")
		return
	}
	v["model"] = model
	v["stream"] = method == "streamRawPredict"
	rewritten, _ := json.Marshal(v)
	r.Body = io.NopCloser(bytes.NewReader(rewritten))
	r.Header.Set("Anthropic-Version", "2023-06-01")
	s.messages(w, r)
}

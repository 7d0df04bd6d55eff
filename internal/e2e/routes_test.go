package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The /v1 routes are authenticated before anything else is said of them:
// an unknown path answers 401 without a key (it tells a stranger nothing
// of which routes exist) and 404 with one, as does a known path asked
// with a method it does not serve.
func TestV1RoutesAreAuthenticatedFirst(t *testing.T) {
	h := startWith(t, setup{teamLimits: monthlyTen})
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/v1/nope", "", http.StatusUnauthorized},
		{"GET", "/v1/nope", testKey, http.StatusNotFound},
		{"POST", "/v1", "", http.StatusUnauthorized},
		{"POST", "/v1", testKey, http.StatusNotFound},
		{"GET", "/v1/models", "", http.StatusUnauthorized},
		{"GET", "/v1/models", "tg-wrong-key", http.StatusUnauthorized},
		{"GET", "/v1/models", testKey, http.StatusOK},
		{"GET", "/v1/chat/completions", testKey, http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(""))
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s (key %q): %d %s, want %d", tc.method, tc.path, tc.key, resp.StatusCode, body, tc.want)
		}
		if !json.Valid(body) {
			t.Errorf("%s %s: body is not JSON: %s", tc.method, tc.path, body)
		}
	}
}

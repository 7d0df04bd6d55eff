package gateway

import (
	"net/http"
	"testing"
)

// TestHeaderListsCanonical: the forwarded and returned headers are looked
// up and set by their keys as written (httpx.Headers), which only finds
// and writes what net/http does when they are canonical.
func TestHeaderListsCanonical(t *testing.T) {
	for _, k := range append(append([]string{}, forwardHeaders...), returnHeaders...) {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}

// TestReturnedIsTheList: returned answers for the returned headers and
// no others (the list and the switch are one list written twice).
func TestReturnedIsTheList(t *testing.T) {
	for _, k := range returnHeaders {
		if !returned(k) {
			t.Errorf("%q is returned, returned says not", k)
		}
	}
	for _, k := range append([]string{"X-Ratelimit-Remaining-Tokens", "Openai-Organization", "Set-Cookie", "content-type", ""}, forwardHeaders...) {
		if returned(k) {
			t.Errorf("returned(%q) is true", k)
		}
	}
}

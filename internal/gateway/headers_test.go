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

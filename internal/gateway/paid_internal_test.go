package gateway

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// A paid route forwards its path with the route's own key: a path the
// paid host could read as another one is refused before anything is
// reserved or sent.
func TestPaidTargetRefusesPathsThatLeaveTheRoute(t *testing.T) {
	ok := map[string][2]string{
		"/paid/geo":                    {"", ""},
		"/paid/geo/":                   {"/", ""},
		"/paid/geo/geocode?q=paris":    {"/geocode", "?q=paris"},
		"/paid/geo/v2/find/":           {"/v2/find/", ""},
		"/paid/geo/a.b/c..d/...?x=../": {"/a.b/c..d/...", "?x=../"},
		"/paid/geo/caf%C3%A9":          {"/caf%C3%A9", ""},
	}
	for target, want := range ok {
		path, query, err := paidTarget("/paid/geo", target)
		if err != nil || path != want[0] || query != want[1] {
			t.Errorf("%s: got %q %q %v; want %q %q", target, path, query, err, want[0], want[1])
		}
	}
	for _, target := range []string{
		"/paid/geo/..", "/paid/geo/../admin", "/paid/geo/v2/../../admin", "/paid/geo/./x", "/paid/geo/x/.",
		"/paid/geo/%2e%2e/admin", "/paid/geo/%2E%2E/admin", "/paid/geo/.%2e/admin", "/paid/geo/%252e%252e/admin",
		"/paid/geo/a%2fb", "/paid/geo/a%2F..%2Fadmin", "/paid/geo/a%5c..%5cadmin", "/paid/geo/a\\..\\admin",
		"/paid/geo//admin", "/paid/geo/x//y", "/paid/geo/..;x/admin", "/paid/geo/%zz",
		"/paid/geox/y", "http://evil.test/paid/geo/x", "/other",
	} {
		_, _, err := paidTarget("/paid/geo", target)
		var re *bound.RequestError
		if !errors.As(err, &re) || !strings.Contains(re.Message, "path") {
			t.Errorf("%s: got %v, want a 400 naming the path", target, err)
		}
	}
}

// Whatever a client sends, a path paidTarget accepts is read by the paid
// host as itself: however many times it is unescaped, with backslashes
// read as slashes, it has no dot or empty segment for a server to
// resolve, so it stays under the route's base URL.
func FuzzPaidTargetStaysUnderTheRoute(f *testing.F) {
	for _, s := range []string{"/paid/geo/a", "/paid/geo/../x", "/paid/geo/%2e%2e/x", "/paid/geo/a//b", "/paid/geo/..;x/y", "/paid/geo/%252e/", "/paid/geo/a\\..\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		p, _, err := paidTarget("/paid/geo", target)
		if err != nil {
			return
		}
		read := p
		for range 3 {
			if u, err := url.PathUnescape(read); err == nil {
				read = u
			}
		}
		read = strings.ReplaceAll(read, "\\", "/")
		if read == "" || read == "/" {
			return
		}
		trimmed := strings.TrimSuffix(read, "/")
		for _, seg := range strings.Split(trimmed, "/")[1:] {
			name, _, _ := strings.Cut(seg, ";")
			if name == "" || name == "." || name == ".." {
				t.Fatalf("%q accepted as %q, which a server reads as %q", target, p, path.Clean(read))
			}
		}
	})
}

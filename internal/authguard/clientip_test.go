package authguard

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		desc, remote, xff, want string
	}{
		{"no proxy", "198.51.100.7:5555", "", "198.51.100.7"},
		{"an untrusted peer's header is ignored", "198.51.100.7:5555", "203.0.113.9", "198.51.100.7"},
		{"through a trusted proxy", "10.1.2.3:80", "203.0.113.9", "203.0.113.9"},
		{"a forged left entry does not win", "10.1.2.3:80", "1.2.3.4, 203.0.113.9", "203.0.113.9"},
		{"through two trusted proxies", "10.1.2.3:80", "203.0.113.9, 10.9.9.9", "203.0.113.9"},
		{"only trusted hops: the peer", "10.1.2.3:80", "10.4.4.4", "10.1.2.3"},
		{"garbage stops the walk", "10.1.2.3:80", "junk", "10.1.2.3"},
		{"IPv6 loopback proxy", "[::1]:80", "2001:db8::1", "2001:db8::1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := ClientIP(r, trusted); got != tc.want {
				t.Fatalf("clientIP = %s, want %s", got, tc.want)
			}
		})
	}
}

package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// versionSegment is a path segment that names an API version: v1,
// v1beta, v1beta1, v2.
var versionSegment = regexp.MustCompile(`^v\d+((alpha|beta)\d*)?$`)

// Warnings are what c does that is valid but likely wrong: an upstream of
// the OpenAI, Anthropic or Gemini wire whose base_url has no version
// segment. The gateway appends the endpoint's path (/chat/completions,
// /messages) to base_url, and these providers serve it under their
// version (https://api.openai.com/v1, https://api.anthropic.com/v1,
// …/v1beta): without it every request answers 404, which the gateway
// turns into a 502 naming the upstream and the address. A preset's own
// address is not warned about.
func (c *Config) Warnings() []string {
	var out []string
	for i, u := range c.Upstreams {
		switch u.Kind {
		case "openai", "anthropic", "gemini":
		default:
			continue
		}
		if p, ok := catalog.Presets[u.Preset]; ok && p.BaseURL == u.BaseURL {
			continue
		}
		b, err := url.Parse(u.BaseURL)
		if err != nil || u.BaseURL == "" {
			continue
		}
		versioned := false
		for _, seg := range strings.Split(b.Path, "/") {
			versioned = versioned || versionSegment.MatchString(seg)
		}
		if !versioned {
			want := map[string]string{"openai": "/v1", "anthropic": "/v1", "gemini": "/v1beta"}[u.Kind]
			out = append(out, fmt.Sprintf("upstreams[%d].base_url %q has no version segment: the gateway appends the endpoint's path to it, and a %s API is served under one (%s%s); without it every request answers 404",
				i, u.BaseURL, u.Kind, strings.TrimSuffix(u.BaseURL, "/"), want))
		}
	}
	return out
}

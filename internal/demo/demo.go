// Package demo holds the demo configuration: OpenAI's, Anthropic's and
// Gemini's model names and list prices in front of the simulated upstream.
package demo

import (
	_ "embed"
	"strings"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

//go:embed demo.yaml
var demoYAML []byte

// Config returns the demo configuration for a simulated upstream at
// upstreamURL (its API root, ending in /v1) and a key with keyHash.
func Config(upstreamURL, keyHash string) (*config.Config, error) {
	vars := map[string]string{"TOLLGATE_DEMO_UPSTREAM": upstreamURL, "TOLLGATE_DEMO_KEY_HASH": keyHash,
		"TOLLGATE_DEMO_GEMINI": strings.TrimSuffix(upstreamURL, "/v1") + "/v1beta"}
	return config.Parse(demoYAML, func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	})
}

// UpstreamOptions are the simulated upstream's settings matching Config: the
// same models, counted with the same encodings, behind the same key.
func UpstreamOptions(c *config.Config) simulated.Options {
	opts := simulated.Options{Encodings: map[string]string{}, APIKey: c.Upstreams[0].APIKey}
	for _, u := range c.Upstreams {
		for _, name := range u.Models {
			opts.Models = append(opts.Models, name)
			opts.Encodings[name] = c.Models[name].Encoding
		}
	}
	return opts
}

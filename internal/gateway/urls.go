package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"sync"

	"github.com/tollgate-dev/tollgate/upstream"
)

// urls are a target's parsed request URLs. The URL a provider makes for an
// endpoint, a model and streaming or not never changes, and parsing it
// again for every request (http.NewRequest's url.Parse) cost more than the
// rest of building the request.
type urls struct {
	mu sync.RWMutex
	m  map[urlKey]parsedURL
}

type urlKey struct {
	ep     upstream.Endpoint
	model  string
	stream bool
}

// parsedURL is a request's URL and Host as http.NewRequest sets them.
type parsedURL struct {
	url  *url.URL
	host string
}

// maxURLs bounds a target's parsed URLs: the models a request may name
// are the configured ones; this guards against any other.
const maxURLs = 1024

// request is http.NewRequestWithContext for the URL p makes for k, parsed
// once: the request gets its own copy of it.
func (c *urls) request(ctx context.Context, p upstream.Provider, k urlKey, body []byte) (*http.Request, error) {
	c.mu.RLock()
	u, ok := c.m[k]
	c.mu.RUnlock()
	if !ok {
		r, err := http.NewRequest(http.MethodPost, p.URL(k.ep, k.model, k.stream), nil)
		if err != nil {
			return nil, err
		}
		u = parsedURL{url: r.URL, host: r.Host}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[urlKey]parsedURL{}
		}
		if len(c.m) < maxURLs {
			c.m[k] = u
		}
		c.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	own := *u.url
	req.URL, req.Host = &own, u.host
	return req, nil
}

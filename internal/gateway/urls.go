package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/bound"
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
	ep     bound.Endpoint
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
	// What http.NewRequestWithContext makes of a POST of body, without
	// its url.Parse of a URL it would be given (some 900 instructions, for
	// "" too).
	own := *u.url
	req := &http.Request{
		Method: http.MethodPost, URL: &own, Host: u.host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), ContentLength: int64(len(body)), Body: http.NoBody,
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}
	if len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
	} else {
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	return req.WithContext(ctx), nil
}

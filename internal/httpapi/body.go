package httpapi

import (
	"io"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/config"
)

// pacedBody reads a request body under a read deadline that moves with it:
// the first byte at latest BodyGrace after start, every next one at the
// minimum rate, the whole body within BodyTimeout. A slow client (a
// slowloris holding a connection open a byte at a time) gets a timeout
// error from Read, and the connection is closed with 408.
type pacedBody struct {
	r     io.Reader
	rc    *http.ResponseController
	cfg   config.Server
	start time.Time
	n     int64
}

// paceBody wraps body; where the connection cannot take a deadline (a
// test's recorder), it is read as it is.
func paceBody(w http.ResponseWriter, body io.Reader, cfg config.Server, now time.Time) io.Reader {
	p := &pacedBody{r: body, rc: http.NewResponseController(w), cfg: cfg, start: now}
	if p.extend() != nil {
		return body
	}
	return p
}

func (p *pacedBody) deadline() time.Time {
	d := p.cfg.BodyGrace
	if p.cfg.MinBodyRate > 0 {
		d += time.Duration(p.n * int64(time.Second) / p.cfg.MinBodyRate)
	}
	if p.cfg.BodyTimeout > 0 {
		d = min(d, p.cfg.BodyTimeout)
	}
	return p.start.Add(d)
}

func (p *pacedBody) extend() error { return p.rc.SetReadDeadline(p.deadline()) }

func (p *pacedBody) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if err == nil && n > 0 {
		_ = p.extend()
	}
	if err == io.EOF {
		// The body is whole: the rest of the exchange (a stream that runs
		// for minutes) is not the body's. A failed body keeps its passed
		// deadline, so the server's drain of the rest fails at once too.
		_ = p.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

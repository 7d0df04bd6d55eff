package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/httpx"
)

// readBody reads the whole body up to max bytes, within the body deadline
// of the settings in force (see paceBody).
func readBody(c echo.Context, max int64) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > max {
		return nil, errTooLarge
	}
	var src io.Reader = r.Body
	if st := settingsOf(c); st != nil {
		src = paceBody(c.Response(), r.Body, r.ContentLength, st.Config().Server, time.Now())
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		// The server stops the body at its Content-Length, which is
		// within max: one buffer of that size.
		body, err = httpx.ReadAll(src, r.ContentLength, max)
		if err == nil && int64(len(body)) > max {
			return nil, errTooLarge
		}
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(c.Response(), io.NopCloser(src), max))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooLarge):
			return nil, errTooLarge
		case errors.As(err, &ne) && ne.Timeout():
			return nil, errBodyTimeout
		}
		return nil, gateway.ErrClientCanceled
	}
	return body, nil
}

// pacedBody reads a request body under a read deadline that moves with it:
// the first byte at latest BodyGrace after start, every next one at the
// minimum rate, the whole body within BodyTimeout. A slow client (a
// slowloris holding a connection open a byte at a time) gets a timeout
// error from Read, and the connection is closed with 408. A body that
// declares a size the minimum rate brings within a second (most requests)
// gets its whole deadline at once — BodyGrace and its size's time —
// instead of a deadline moved at every read (each a timer's change).
type pacedBody struct {
	r     io.Reader
	rc    http.ResponseController
	cfg   config.Server
	start time.Time
	n     int64
	fixed bool // the deadline is the whole body's
}

// paceBody wraps body, of size bytes (-1: unknown); where the connection
// cannot take a deadline (a test's recorder), it is read as it is.
func paceBody(w http.ResponseWriter, body io.Reader, size int64, cfg config.Server, now time.Time) io.Reader {
	p := &pacedBody{r: body, rc: *http.NewResponseController(w), cfg: cfg, start: now}
	if size >= 0 && size <= cfg.MinBodyRate {
		p.n, p.fixed = size, true
	}
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
	if err == nil && n > 0 && !p.fixed {
		p.n += int64(n)
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

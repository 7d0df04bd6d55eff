package upstream

import (
	"io"
	"strings"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// EventSource reads a stream's events: each one's name (where the wire
// names events outside their data) and data.
type EventSource interface {
	Next() (name string, data []byte, err error)
	// Buffered is how many bytes are read and not yet returned: the
	// gateway flushes to the client when none are.
	Buffered() int
}

// IsStream reports whether an answer of content type ct is a stream in
// wire w.
func IsStream(w convert.Wire, ct string) bool {
	if w == convert.Converse {
		return strings.HasPrefix(ct, "application/vnd.amazon.eventstream")
	}
	return strings.HasPrefix(ct, "text/event-stream")
}

// NewEventSource reads the stream of wire w from r: server-sent events, or
// Bedrock's event-stream frames.
func NewEventSource(w convert.Wire, r io.Reader) EventSource {
	if w == convert.Converse {
		return newFrameSource(r)
	}
	return sseSource{NewEventReader(r)}
}

type sseSource struct{ r *EventReader }

func (s sseSource) Next() (string, []byte, error) {
	_, data, err := s.r.Next()
	return "", data, err
}

func (s sseSource) Buffered() int { return s.r.Buffered() }

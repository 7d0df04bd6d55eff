package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// maxFrame bounds one Bedrock event-stream frame the gateway reads (the
// format's own limit is 16 MiB; a chat event is a few hundred bytes).
const maxFrame = 1 << 20

// frameSource reads AWS event-stream frames (Bedrock's ConverseStream):
// an event's name is its :event-type header; an exception frame's is its
// :exception-type, its data the exception's JSON.
type frameSource struct {
	r   *bufio.Reader
	dec *eventstream.Decoder
	buf []byte
}

func newFrameSource(r io.Reader) *frameSource {
	return &frameSource{r: bufio.NewReaderSize(r, 32<<10), dec: eventstream.NewDecoder(), buf: make([]byte, 0, 4096)}
}

func (f *frameSource) Next() (string, []byte, error) {
	if _, err := f.r.Peek(1); err != nil {
		return "", nil, err // io.EOF between frames: the stream's end
	}
	msg, err := f.dec.Decode(io.LimitReader(f.r, maxFrame), f.buf[:0])
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // a frame cut in the middle
		}
		return "", nil, fmt.Errorf("upstream: reading an event-stream frame: %w", err)
	}
	name := headerString(msg.Headers, ":event-type")
	if headerString(msg.Headers, ":message-type") != "event" {
		name = headerString(msg.Headers, ":exception-type")
		if name == "" {
			name = "exception"
		}
	}
	return name, msg.Payload, nil
}

func (f *frameSource) Buffered() int { return f.r.Buffered() }

func headerString(h eventstream.Headers, name string) string {
	if v := h.Get(name); v != nil {
		return v.String()
	}
	return ""
}

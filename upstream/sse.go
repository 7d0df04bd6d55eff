package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
)

// maxEventBytes bounds one SSE event; a longer one is a broken stream.
const maxEventBytes = 4 << 20

// ErrEventTooLarge reports an SSE event over maxEventBytes.
var ErrEventTooLarge = errors.New("upstream: SSE event too large")

// EventReader splits an SSE stream into events without re-encoding them:
// each event is returned as its raw bytes (lines and the blank line that ends
// it) together with its joined data field.
type EventReader struct {
	r     *bufio.Reader
	raw   []byte
	data  []byte
	ended bool
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the next event. raw and data are valid until the next call.
// At the end of the stream it returns io.EOF; a stream cut in the middle of
// an event returns the partial event first, then io.ErrUnexpectedEOF.
func (e *EventReader) Next() (raw, data []byte, err error) {
	if e.ended {
		return nil, nil, io.EOF
	}
	e.raw, e.data = e.raw[:0], e.data[:0]
	hasData := false
	for {
		line, err := e.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: collect it whole.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= maxEventBytes {
				line, err = e.r.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if len(e.raw)+len(line) > maxEventBytes {
			return nil, nil, ErrEventTooLarge
		}
		e.raw = append(e.raw, line...)
		trimmed := bytes.TrimRight(line, "\r\n")
		if err != nil {
			e.ended = true
			if len(bytes.TrimSpace(e.raw)) == 0 {
				if errors.Is(err, io.EOF) {
					return nil, nil, io.EOF
				}
				return nil, nil, err
			}
			if len(trimmed) > 0 {
				hasData = e.field(trimmed, hasData)
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return e.raw, e.data, err
		}
		if len(trimmed) == 0 {
			if len(e.raw) == len(line) {
				e.raw = e.raw[:0] // blank lines between events
				continue
			}
			return e.raw, e.data, nil
		}
		hasData = e.field(trimmed, hasData)
	}
}

// Buffered reports how many bytes of the stream have arrived but not been
// returned yet. A relay flushes only when it is zero: events that arrived
// together leave together, and none waits for a later one.
func (e *EventReader) Buffered() int { return e.r.Buffered() }

func (e *EventReader) field(line []byte, hasData bool) bool {
	if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		v = bytes.TrimPrefix(v, []byte(" "))
		if hasData {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, v...)
		return true
	}
	return hasData
}

// StreamMeter watches an OpenAI chat or completions stream as it passes:
// it keeps the last usage reported (usage is cumulative: counted once), the
// text generated so far (to count when no usage comes), and whether the
// stream ended with [DONE].
type StreamMeter struct {
	usage     budget.Usage
	hasUsage  bool
	done      bool
	text      strings.Builder
	maxText   int
	truncated bool
}

// NewStreamMeter returns a meter that keeps at most maxText bytes of output.
func NewStreamMeter(maxText int) *StreamMeter { return &StreamMeter{maxText: maxText} }

// Observe reads one event's data. usageOnly is true for the final chunk that
// carries only usage (no choices), which the gateway strips when the client
// did not ask for it. A malformed event is reported and otherwise ignored.
//
// Chunks are read with gjson rather than encoding/json: every chunk of every
// stream passes here, and only a few string fields are needed from each.
func (m *StreamMeter) Observe(data []byte) (usageOnly bool, err error) {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		m.done = true
		return false, nil
	}
	if len(data) == 0 {
		return false, nil
	}
	if !gjson.ValidBytes(data) {
		return false, errors.New("upstream: malformed stream chunk")
	}
	chunk := gjson.ParseBytes(data)
	choices := chunk.Get("choices")
	n := 0
	choices.ForEach(func(_, ch gjson.Result) bool {
		n++
		m.keep(ch.Get("text").String())
		if d := ch.Get("delta"); d.Exists() {
			m.keep(d.Get("content").String())
			m.keep(d.Get("refusal").String())
			d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				m.keep(tc.Get("function.name").String())
				m.keep(tc.Get("function.arguments").String())
				return true
			})
		}
		return true
	})
	raw := chunk.Get("usage")
	if !raw.IsObject() {
		return false, nil
	}
	var w wireUsage
	if err := json.Unmarshal([]byte(raw.Raw), &w); err != nil {
		return false, fmt.Errorf("upstream: stream usage: %w", err)
	}
	u, err := w.usage()
	if err != nil {
		return false, fmt.Errorf("upstream: stream usage: %w", err)
	}
	m.usage, m.hasUsage = u, true // cumulative: the last report wins
	return n == 0, nil
}

func (m *StreamMeter) keep(s string) {
	if s == "" {
		return
	}
	if room := m.maxText - m.text.Len(); len(s) > room {
		m.truncated = true
		s = s[:max(room, 0)]
	}
	m.text.WriteString(s)
}

// Usage returns the last usage the stream reported.
func (m *StreamMeter) Usage() (budget.Usage, bool) { return m.usage, m.hasUsage }

// Done reports whether the stream ended with [DONE].
func (m *StreamMeter) Done() bool { return m.done }

// Text returns the output text seen so far (bounded by maxText).
func (m *StreamMeter) Text() string { return m.text.String() }

// Truncated reports whether more output passed than the meter kept, so its
// text no longer bounds what was generated.
func (m *StreamMeter) Truncated() bool { return m.truncated }

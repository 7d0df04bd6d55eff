package upstream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/upstream/convert"
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

// readers are the 16 KiB buffers of EventReaders released: one a stream
// otherwise, the largest allocation of a streamed request.
var readers sync.Pool

// NewEventReader reads events from r. Release gives its buffer back.
func NewEventReader(r io.Reader) *EventReader {
	if br, ok := readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return &EventReader{r: br}
	}
	return &EventReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// Release returns the reader's buffer for another stream's use; e is not
// to be used after, nor what Next returned.
func (e *EventReader) Release() {
	if e.r != nil {
		e.r.Reset(nil)
		readers.Put(e.r)
		e.r = nil
	}
}

// Next returns the next event. raw and data are valid until the next call.
// At the end of the stream it returns io.EOF; a stream cut in the middle of
// an event returns the partial event first, then io.ErrUnexpectedEOF.
func (e *EventReader) Next() (raw, data []byte, err error) {
	if e.ended {
		return nil, nil, io.EOF
	}
	// The common event — one data line and the blank line after it —
	// already whole in the buffer is returned from there, not copied.
	if e.r.Buffered() == 0 {
		_, _ = e.r.Peek(1) // wait for bytes; an error is the loop's to report
	}
	if buf, _ := e.r.Peek(e.r.Buffered()); len(buf) > 0 {
		if n, d, ok := dataEvent(buf); ok {
			_, _ = e.r.Discard(n)
			return buf[:n:n], d, nil
		}
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
		trimmed := trimEOL(line)
		if err != nil {
			e.ended = true
			if len(bytes.TrimSpace(e.raw)) == 0 {
				if errors.Is(err, io.EOF) {
					return nil, nil, io.EOF
				}
				return nil, nil, err
			}
			if len(trimmed) > 0 {
				e.field(trimmed, hasData)
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

// dataEvent reads an event of one data line at the start of buf: its
// length with the blank line that ends it, and its data (the value after
// "data:" and one space, without the line's end); ok is false where buf
// does not begin with a whole such event (another field, more lines, not
// all of it arrived), which Next then reads line by line.
func dataEvent(buf []byte) (n int, data []byte, ok bool) {
	if !bytes.HasPrefix(buf, []byte("data:")) {
		return 0, nil, false
	}
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		return 0, nil, false
	}
	line := trimEOL(buf[:nl+1])
	rest := buf[nl+1:]
	switch {
	case len(rest) > 0 && rest[0] == '\n':
		n = nl + 2
	case len(rest) > 1 && rest[0] == '\r' && rest[1] == '\n':
		n = nl + 3
	default:
		return 0, nil, false
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return 0, nil, false // a lone CR ends a line in SSE: the slow path's
	}
	data = line[len("data:"):]
	if len(data) > 0 && data[0] == ' ' {
		data = data[1:]
	}
	return n, data[:len(data):len(data)], true
}

// trimEOL is bytes.TrimRight(line, "\r\n") without building the cutset's
// table for every line.
func trimEOL(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
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
	usage     convert.Usage // the figures reported so far
	start     convert.Usage // Anthropic's message_start usage, until message_delta reports the output
	anthropic bool
	responses bool
	done      bool
	text      []byte // Text's bytes: kept, never rewritten, until Release
	maxText   int
	truncated bool
	// head is the last plain chunk's bytes up to the opening quote of its
	// first text key (scanPlain); headUsage says usage" is in it.
	head      []byte
	headUsage bool
	// tail is the last full scan's bytes after its first text value up to
	// and including the opening quote of its last value (scanPlain);
	// tailNoUsage says it has no usage but a null one (usageNullByTail).
	tail        []byte
	tailNoUsage bool
}

// read keeps the text of data, a chunk whose text can begin no earlier
// than skip (headSkip); first is what readFirstValue found in it. A chunk
// read as far as its tail has its first value kept as it is and only the
// rest of its last value scanned; a chunk of another layout is scanned
// from where it leaves the last head (resume), and leaves its own head and
// tail for the chunks after it.
func (m *StreamMeter) read(data []byte, skip int, first firstValue) {
	switch {
	case first.resume > 0 && bytes.IndexByte(data[first.resume:], '\\') < 0:
		m.keepBytes(data[first.start+1 : first.end])
		m.scanPlainAt(data, first.resume, plainState{first: skip, firstEnd: first.end, skipped: true})
	case skip == 0 && bytes.IndexByte(data, '\\') < 0:
		m.scanPlain(data, m.resume(data), true)
	default:
		m.keepStringsFrom(data, skip)
	}
}

// firstValue is a chunk read as far as the tail it shares with the last
// full scan (scanPlain): its first text value's quotes, start and end,
// and resume, the tail's last quote, where a scan of the rest starts.
// Zero when the chunk was not read so.
type firstValue struct{ start, end, resume int }

// readFirstValue reads a chunk whose head is the last one's (skip > 0,
// headSkip) up to its tail: the first text key at skip, its string value
// (no backslash in it), then the last full scan's tail. As scanPlain
// would read them: the bytes after the value are the tail, which holds no
// text key, so a scan of them skips to its last quote (identical bytes
// scan identically).
func (m *StreamMeter) readFirstValue(data []byte, skip int) firstValue {
	if skip <= 0 || len(m.tail) == 0 {
		return firstValue{}
	}
	k := nextQuote(data, skip+1)
	if k < 0 || !isTextKey(data[skip+1:k]) {
		return firstValue{}
	}
	j := skipSpace(data, k+1)
	if j >= len(data) || data[j] != ':' {
		return firstValue{}
	}
	v := skipSpace(data, j+1)
	if v >= len(data) || data[v] != '"' {
		return firstValue{}
	}
	e := nextQuote(data, v+1)
	if e < 0 || bytes.IndexByte(data[v+1:e], '\\') >= 0 {
		return firstValue{} // an escaped quote, maybe: not where the string ends
	}
	if !bytes.HasPrefix(data[e+1:], m.tail) {
		return firstValue{}
	}
	return firstValue{start: v, end: e, resume: e + len(m.tail)}
}

// resume is where a scan of data (without a backslash) for its first text
// key can start, when data shares only its first p bytes with the last
// head. Nothing before the head's last quote is a text key, and the head
// has no backslash: in those p bytes every quote opens or closes a string,
// as in the head. A string that closes in them, and whose next byte that
// is not space is in them too, is the key or value it was in the head:
// not a text key. The scan starts at the first string that is not known
// so: the one open at p, or the last one closed before it when what
// follows that one is past p. (The stream that changes its layout halfway
// — OpenAI's role chunk, its first text chunk, its finish and usage
// chunks — shares the head up to "delta" or "choices".)
func (m *StreamMeter) resume(data []byte) int {
	p := commonPrefix(data, m.head)
	if p == 0 {
		return 0
	}
	h := m.head[:p]
	last := bytes.LastIndexByte(h, '"')
	switch {
	case last < 0:
		return p
	case bytes.Count(h, []byte{'"'})%2 == 1:
		return last // it opens a string that runs past p
	case skipSpace(h, last+1) < p:
		return p // every string before p is known
	}
	return bytes.LastIndexByte(h[:last], '"') // the last string's opening quote
}

// commonPrefix is the length of the longest prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// headSkip is where the text of a chunk can begin: the last quote of the
// head it shares with the last chunk scanned, or 0.
func (m *StreamMeter) headSkip(data []byte) int {
	if n := len(m.head); n > 0 && len(data) >= n && bytes.Equal(data[:n], m.head) {
		return n - 1
	}
	return 0
}

// NewStreamMeter returns a meter for an OpenAI stream that keeps at most
// maxText bytes of output.
func NewStreamMeter(maxText int) *StreamMeter { return newMeter(StreamMeter{maxText: maxText}) }

// meters are released meters, their buffers kept: a stream's meter grew
// its buffers a dozen times a stream, one allocation each.
var meters sync.Pool

// maxKept bounds each buffer a released meter keeps for the next.
const maxKept = 64 << 10

// newMeter returns a meter set as m, from meters where one was released.
func newMeter(m StreamMeter) *StreamMeter {
	p, _ := meters.Get().(*StreamMeter)
	if p == nil {
		p = new(StreamMeter)
	}
	m.text, m.head, m.tail = p.text[:0], p.head[:0], p.tail[:0]
	*p = m
	return p
}

// Release hands m back for another stream. Neither m nor a string Text
// returned is used after it.
func (m *StreamMeter) Release() {
	keep := func(b []byte) []byte {
		if cap(b) > maxKept {
			return nil
		}
		return b[:0]
	}
	*m = StreamMeter{text: keep(m.text), head: keep(m.head), tail: keep(m.tail)}
	meters.Put(m)
}

// NewAnthropicStreamMeter returns a meter for an Anthropic Messages stream:
// input usage comes in message_start, the cumulative output in
// message_delta (counted once, the last report winning), and message_stop
// ends it.
func NewAnthropicStreamMeter(maxText int) *StreamMeter {
	return newMeter(StreamMeter{maxText: maxText, anthropic: true})
}

// NewResponsesStreamMeter returns a meter for a Responses API stream: text
// arrives in output_text deltas, usage in the final response.completed (or
// response.incomplete) event.
func NewResponsesStreamMeter(maxText int) *StreamMeter {
	return newMeter(StreamMeter{maxText: maxText, responses: true})
}

func (m *StreamMeter) observeResponses(data []byte) error {
	kind := gjson.GetBytes(data, "type").String()
	switch kind {
	case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
		m.keep(gjson.GetBytes(data, "delta").String())
	case "response.completed", "response.incomplete", "response.failed":
		m.done = true
		// The response is read as a whole answer is (AnswerUsage): its last
		// usage member, and its web searches from its output.
		resp, ok := convert.LastMember(data, "response")
		if !ok {
			return nil
		}
		if raw, ok := convert.LastMember(resp, "usage"); !ok || raw[0] != '{' {
			return nil
		}
		u, err := convert.AnswerUsage(convert.Responses, resp)
		if err != nil {
			return fmt.Errorf("upstream: stream usage: %w", err)
		}
		m.usage = u
	}
	return nil
}

func (m *StreamMeter) observeAnthropic(data []byte) error {
	m.keepStrings(data)
	kind := gjson.GetBytes(data, "type").String()
	switch kind {
	case "message_stop":
		m.done = true
	case "message_start", "message_delta":
		path := "usage"
		if kind == "message_start" {
			path = "message.usage"
		}
		raw := gjson.GetBytes(data, path)
		if !raw.IsObject() {
			return nil
		}
		u, err := convert.ReadUsage(convert.Anthropic, []byte(raw.Raw))
		if err != nil {
			return fmt.Errorf("upstream: stream usage: %w", err)
		}
		// message_start reports the input (and an output of 1, which is
		// not the stream's); message_delta the output so far, and in
		// newer API versions the input figures again, which then win.
		if kind == "message_start" {
			m.start = u
			return nil
		}
		merged := m.start
		merged.Update(u)
		m.usage = merged
	}
	return nil
}

// Observe reads one event's data. usageOnly is true for the final chunk that
// carries only usage (no choices), which the gateway strips when the client
// did not ask for it. A malformed event is reported and otherwise ignored.
//
// Every chunk of every stream passes here, so the common chunk is not
// parsed: its generated text is cut out of the bytes by key (see
// keepStrings). Only a chunk that mentions usage is decoded in full.
func (m *StreamMeter) Observe(data []byte) (usageOnly bool, err error) {
	if n := len(data); n > 0 && (!plainEnd(data[0]) || !plainEnd(data[n-1])) {
		data = bytes.TrimSpace(data)
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		m.done = true
		return false, nil
	}
	if len(data) == 0 {
		return false, nil
	}
	if m.anthropic {
		return false, m.observeAnthropic(data)
	}
	if m.responses {
		return false, m.observeResponses(data)
	}
	// The search for usage starts where the chunk leaves the head of the
	// last chunk read, when that head has no usage key: five bytes before,
	// so that a key across the boundary is not missed.
	skip, from := m.headSkip(data), 0
	if skip > 0 && !m.headUsage {
		from = max(0, skip+1-len(`usage`))
	}
	// Read before it is parsed: a malformed chunk's text reached the
	// client all the same, and counts.
	first := m.readFirstValue(data, skip)
	if first.resume > 0 && !m.headUsage && m.tailNoUsage && closesObject(data[first.resume+1:]) {
		// The common chunk: the last one's head, its text, the last full
		// scan's tail (no text key, no usage but a null one), and the
		// rest of that tail's last string, which closes the chunk — no
		// key after it, so no text and no usage but the first value.
		m.keepBytes(data[first.start+1 : first.end])
		return false, nil
	}
	m.read(data, skip, first)
	if m.usageNullByTail(data, first) || !mayHoldUsage(data[from:]) {
		return false, nil
	}
	// The chunk that reports usage: its usage member (or Groq's, in
	// x_groq), found as an answer's is (convert.LastMember), read by the
	// one usage reader.
	usage, ok := convert.LastMember(data, "usage")
	if !ok || usage[0] != '{' {
		groq, _ := convert.LastMember(data, "x_groq")
		if usage, ok = convert.LastMember(groq, "usage"); !ok || usage[0] != '{' {
			return false, nil
		}
	}
	u, err := convert.ReadUsage(convert.OpenAI, usage)
	if err != nil {
		return false, fmt.Errorf("upstream: stream usage: %w", err)
	}
	m.usage = u // cumulative: the last report wins
	choices, _ := convert.LastMember(data, "choices")
	return len(choices) == 0 || string(choices) == "null" || choices[0] == '[' && len(bytes.TrimSpace(choices[1:len(choices)-1])) == 0, nil
}

// closesObject reports whether rest, what follows the opening quote of a
// chunk's last string value, is the rest of that string and the end of
// the chunk's object: no escape, one quote, then '}'.
func closesObject(rest []byte) bool {
	n := len(rest)
	if n < 2 || rest[n-2] != '"' || rest[n-1] != '}' {
		return false
	}
	for _, c := range rest[:n-2] { // a few bytes: shorter than IndexByte's call
		if c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// plainEnd reports whether c, a chunk's first or last byte, is one
// bytes.TrimSpace keeps as it is: ASCII, and not a space or a control
// character. A chunk's JSON starts and ends with such a byte; checking
// that is cheaper than the trim.
func plainEnd(c byte) bool { return c > ' ' && c < utf8.RuneSelf }

// usageNullByTail says a chunk holds no usage from the chunks read before
// it: its head (headSkip) is the last one's and has no usage key, it was
// read as far as the last full scan's tail (first, readFirstValue), which
// has none or only a null one, and what follows the tail (the rest of its
// last value) has none either. OpenAI's chunks all say "usage": null;
// this reads their first value and the end, not every byte after the
// head for usage".
func (m *StreamMeter) usageNullByTail(data []byte, first firstValue) bool {
	return first.resume > 0 && !m.headUsage && m.tailNoUsage && !mayHoldUsage(data[first.resume+1:])
}

// isTextKey reports whether a key (its bytes between the quotes) is one
// of the chunk fields that carry generated text: delta content, refusals
// and tool-call arguments in chat, text in legacy completions, function
// names in tool calls; Anthropic's text, tool-input JSON and thinking
// deltas.
func isTextKey(k []byte) bool {
	switch string(k) { // no allocation: the compiler compares in place
	case "content", "text", "refusal", "arguments", "name", "partial_json", "thinking":
		return true
	}
	return false
}

// keepStrings keeps the string values of the text keys (isTextKey) of a
// chunk, in one pass over its strings: a string followed by a colon is a
// key; the value of a text key is kept where it is a string (arrays and
// nulls under the same keys — logprobs' "content", say — are skipped);
// every other string is stepped over whole, so text that looks like a key
// inside a value is never read as one.
func (m *StreamMeter) keepStrings(data []byte) { m.keepStringsFrom(data, m.headSkip(data)) }

// keepStringsFrom is keepStrings for a chunk whose text can begin no
// earlier than skip (headSkip).
func (m *StreamMeter) keepStringsFrom(data []byte, skip int) {
	// Before skip is a head scanPlain read: no backslash there.
	if bytes.IndexByte(data[skip:], '\\') < 0 {
		m.scanPlain(data, skip, false)
		return
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		end := quoteEnd(data[i:])
		if end < 0 {
			return
		}
		key := data[i+1 : i+end]
		i += end + 1
		j := skipSpace(data, i)
		if j == len(data) || data[j] != ':' {
			i--
			continue // a value
		}
		i = skipSpace(data, j+1)
		if !isTextKey(key) || i == len(data) || data[i] != '"' {
			i--
			continue
		}
		end = quoteEnd(data[i:])
		if end < 0 {
			return
		}
		if v := data[i+1 : i+end]; bytes.IndexByte(v, '\\') < 0 {
			m.keepBytes(v) // the common case: no escape, no copy but into the text
		} else {
			m.keep(unquote(data[i : i+end+1]))
		}
		i += end
	}
}

// scanPlain is keepStrings for a chunk without a backslash, the common
// one: every quote then opens or closes a string, so the strings are the
// pairs of quotes, and the quotes are found eight bytes at a time instead
// of walking every string byte by byte. It leaves the chunk's head in
// m.head, and returns where the chunk's text can begin: its first text
// key's opening quote, or -1 where it has none.
//
// The chunks of one stream repeat their head ("id", "object", "created",
// "model", ... "delta") up to the first text key. Where a chunk begins
// with a scanned chunk's bytes up to and including the opening quote of
// that one's first text key, nothing before that quote is text (the same
// bytes scan the same): from, that quote's offset (headSkip), is where the
// scan starts.
//
// They repeat their tail too, from the end of the first text value to the
// last string value ("logprobs", "finish_reason", "usage" … up to the
// opening quote of "obfuscation"'s random value). A chunk whose bytes after
// its first text value are the last full scan's tail (m.tail, which held
// no text key) reads nothing in them either: the scan resumes inside that
// last value, as the full scan was there.
//
// resumed says from is not a head's last quote but where resume left the
// scan: the head is then recorded wherever the first text key is.
func (m *StreamMeter) scanPlain(data []byte, from int, resumed bool) int {
	return m.scanPlainAt(data, from, plainState{first: -1, firstEnd: -1, resumed: resumed})
}

// plainState is where a scanPlain stands: the first text key's quote,
// where the first kept value closes, whether the scan skipped a tail, and
// whether it started where resume left it. read starts a scan after a
// tail that readFirstValue found.
type plainState struct {
	first, firstEnd  int
	skipped, resumed bool
}

// scanPlainAt is scanPlain from i, in state st.
func (m *StreamMeter) scanPlainAt(data []byte, i int, st plainState) int {
	from := i
	// The strings are the pairs of quotes, in order (no escapes:
	// keepStringsFrom sends those chunks elsewhere). A string followed by
	// a colon is a key; the string after a text key's colon is its value.
	value, first := -1, st.first
	// For the tail: where the first kept value closes, the last value
	// string that is neither a key nor kept, whether a text key came after
	// the first value, and whether this scan skipped a tail.
	firstEnd, lastValue, textAfter, skipped := st.firstEnd, -1, false, st.skipped
	for {
		start := nextQuote(data, i)
		if start < 0 {
			break
		}
		end := nextQuote(data, start+1)
		if end < 0 {
			break
		}
		i = end + 1
		if value >= 0 {
			v := value
			value = -1
			if start == v {
				m.keepBytes(data[start+1 : end])
				if firstEnd < 0 {
					firstEnd = end
					if n := len(m.tail); n > 0 && bytes.HasPrefix(data[end+1:], m.tail) {
						// Resume at the tail's last quote, which opens a
						// value.
						skipped, i = true, end+n
					}
				}
				continue
			}
		}
		j := skipSpace(data, end+1)
		if j == len(data) || data[j] != ':' {
			lastValue = start
			continue // a value
		}
		if !isTextKey(data[start+1 : end]) {
			continue // a key whose value is not text
		}
		if first < 0 {
			first = start
		}
		if firstEnd >= 0 {
			textAfter = true
		}
		if v := skipSpace(data, j+1); v < len(data) && data[v] == '"' {
			value = v
		}
	}
	switch {
	case first < 0:
		m.head, m.tail = m.head[:0], m.tail[:0]
		return -1
	case (first != from || st.resumed) && !st.skipped:
		m.head = append(m.head[:0], data[:first+1]...)
		m.headUsage = bytes.Contains(m.head, []byte(`usage"`))
		m.tail = m.tail[:0]
	}
	if !skipped {
		m.tail = m.tail[:0]
		if firstEnd >= 0 && !textAfter && lastValue > firstEnd {
			m.tail = append(m.tail, data[firstEnd+1:lastValue+1]...)
			m.tailNoUsage = !mayHoldUsage(m.tail)
		}
	}
	return first
}

// nextQuote returns the index of the first quote in data from i, or -1,
// looking at eight bytes at a time.
func nextQuote(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		x := binary.LittleEndian.Uint64(data[i:]) ^ 0x2222222222222222 // a quote's byte is zero
		// The high bit of each zero byte, exactly (no carry between bytes).
		if z := ^((x&0x7f7f7f7f7f7f7f7f + 0x7f7f7f7f7f7f7f7f) | x | 0x7f7f7f7f7f7f7f7f); z != 0 {
			return i + bits.TrailingZeros64(z)/8
		}
	}
	for ; i < len(data); i++ {
		if data[i] == '"' {
			return i
		}
	}
	return -1
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// quoteEnd returns the index of the quote that closes the JSON string
// starting at s[0], or -1. (A byte loop: the strings of a chunk are a few
// bytes each, shorter than what IndexByte's call costs.)
func quoteEnd(s []byte) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unquote decodes a JSON string literal; escapes are rare in generated text,
// so the plain case costs one copy.
func unquote(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(q[1 : len(q)-1]) // keep the raw text: it still bounds the count
	}
	return s
}

// keepBytes is keep for text without escapes, appended as it is.
func (m *StreamMeter) keepBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	if room := m.maxText - len(m.text); len(b) > room {
		m.truncated = true
		b = b[:max(room, 0)]
	}
	m.text = append(m.text, b...)
}

func (m *StreamMeter) keep(s string) {
	if s == "" {
		return
	}
	if room := m.maxText - len(m.text); len(s) > room {
		m.truncated = true
		s = s[:max(room, 0)]
	}
	m.text = append(m.text, s...)
}

// Usage returns the last usage the stream reported (Reported false: none).
func (m *StreamMeter) Usage() convert.Usage { return m.usage }

// Done reports whether the stream ended with [DONE].
func (m *StreamMeter) Done() bool { return m.done }

// Text returns the output text seen so far (bounded by maxText), valid
// until Release: it is the meter's own bytes, which later text is appended
// after, never over.
func (m *StreamMeter) Text() string {
	return unsafe.String(unsafe.SliceData(m.text), len(m.text))
}

// Truncated reports whether more output passed than the meter kept, so its
// text no longer bounds what was generated.
func (m *StreamMeter) Truncated() bool {
	return m.truncated
}

// mayHoldUsage reports whether a chunk may report usage: whether some
// `usage"` in it is not a key whose value is null. OpenAI sends "usage":
// null on every chunk of a stream that asked for usage, and only the last
// one holds it; a chunk without the bytes holds none. (`usage"` rather
// than `"usage"`: a chunk is full of quotes, each a false start for the
// search.)
func mayHoldUsage(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`usage"`))
		if j < 0 {
			return false
		}
		i += j + len(`usage"`)
		if k := skipSpace(data, i); k < len(data) && data[k] == ':' {
			if k = skipSpace(data, k+1); bytes.HasPrefix(data[k:], []byte("null")) {
				continue
			}
		}
		return true
	}
}

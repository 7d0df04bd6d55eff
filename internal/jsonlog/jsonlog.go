// Package jsonlog is a slog handler that writes what slog.JSONHandler
// writes, byte for byte, at a fraction of its cost for the records the
// gateway logs at every request: a message and flat attributes of
// strings, integers, booleans and durations. slog's handler turns each
// value through its generic path and formats the time anew for every
// line — some 25,000 instructions for the request line, more than the
// rest of the settlement. Any other record (groups, errors, floats, times,
// values of any kind, a derived handler) is handed to slog.JSONHandler
// itself, so the output never differs (TestSameBytesAsSlog).
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jsonx"
)

// Handler writes JSON lines. It is safe for concurrent use.
type Handler struct {
	slow *slog.JSONHandler
	out  *lockedWriter
	// second is the formatted date, time and zone of the last second a
	// line was written in.
	second atomic.Pointer[second]
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// New returns a handler writing to w with slog's default options.
func New(w io.Writer) *Handler {
	out := &lockedWriter{w: w}
	return &Handler{slow: slog.NewJSONHandler(out, nil), out: out}
}

// Enabled reports whether l is logged (Info and above).
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.slow.Enabled(ctx, l) }

// WithAttrs and WithGroup return slog's handler: derived loggers are not
// on the request path.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler { return h.slow.WithAttrs(as) }

// WithGroup: see WithAttrs.
func (h *Handler) WithGroup(name string) slog.Handler { return h.slow.WithGroup(name) }

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r as one line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	var buf [24]slog.Attr
	attrs := buf[:0]
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	ok, err := h.writeLine(r.Time, r.Level, r.Message, attrs)
	if !ok {
		err = h.slow.Handle(ctx, r)
	}
	return err
}

// LogLine writes a line of level, msg and attrs at the current time, as
// Handle writes the record a Logger would make of them — without the
// record, and without the caller's program counter a Logger looks up for
// it, which this handler never writes. ok is false where the line is not
// one this handler writes itself (see appendLine): the caller then logs
// it through its Logger.
func (h *Handler) LogLine(level slog.Level, msg string, attrs ...slog.Attr) (ok bool) {
	return h.lineAt(time.Now(), level, msg, attrs)
}

func (h *Handler) lineAt(t time.Time, level slog.Level, msg string, attrs []slog.Attr) (ok bool) {
	if !h.Enabled(context.Background(), level) {
		return true
	}
	ok, _ = h.writeLine(t, level, msg, attrs)
	return ok
}

// writeLine writes the line of t, level, msg and attrs from a pooled
// buffer, where this handler writes such a line (ok).
func (h *Handler) writeLine(t time.Time, level slog.Level, msg string, attrs []slog.Attr) (ok bool, err error) {
	bp := buffers.Get().(*[]byte)
	b, ok := h.appendLine((*bp)[:0], t, level, msg, attrs)
	if ok {
		_, err = h.out.Write(b)
	}
	if cap(b) <= 64<<10 { // a buffer grown past that is not worth keeping
		*bp = b
		buffers.Put(bp)
	}
	return ok, err
}

// appendLine appends the line of a record of t, level, msg and attrs; ok
// is false where it has anything but flat attributes of the kinds written
// here. A plain loop over a slice: the line is written at every request,
// and an iterator's closures cost allocations and calls per attribute.
func (h *Handler) appendLine(b []byte, t time.Time, level slog.Level, msg string, attrs []slog.Attr) (_ []byte, ok bool) {
	for i := range attrs {
		switch attrs[i].Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
			if attrs[i].Key == "" {
				return b, false
			}
		default:
			return b, false
		}
	}
	b = append(b, '{')
	if !t.IsZero() {
		if b, ok = h.appendTime(append(b, `"time":"`...), t.Round(0)); !ok {
			return b, false
		}
		b = append(b, `",`...)
	}
	b = append(b, `"level":"`...)
	b = append(b, level.String()...)
	b = append(b, `","msg":"`...)
	b = appendEscaped(b, msg)
	b = append(b, '"')
	for i := range attrs {
		a := &attrs[i]
		b = append(b, `,"`...)
		b = appendEscaped(b, a.Key)
		b = append(b, `":`...)
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = append(b, '"')
			b = appendEscaped(b, v.String())
			b = append(b, '"')
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = strconv.AppendInt(b, int64(v.Duration()), 10)
		}
	}
	return append(b, "}\n"...), true
}

type second struct {
	unix     int64
	loc      *time.Location
	dateTime string // 2006-01-02T15:04:05
	zone     string // Z07:00
}

// appendTime appends t as time.RFC3339Nano formats it, the date, time and
// zone formatted once a second; ok is false for a year RFC 3339 cannot
// write (slog's handler notes an error there).
func (h *Handler) appendTime(b []byte, t time.Time) (_ []byte, ok bool) {
	sec := h.second.Load()
	if sec == nil || sec.unix != t.Unix() || sec.loc != t.Location() {
		if y := t.Year(); y < 0 || y >= 10000 {
			return b, false
		}
		s := t.Truncate(time.Second).Format("2006-01-02T15:04:05Z07:00")
		sec = &second{unix: t.Unix(), loc: t.Location(), dateTime: s[:19], zone: s[19:]}
		h.second.Store(sec)
	}
	b = append(b, sec.dateTime...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, sec.zone...), true
}

// appendEscaped appends s escaped as slog's JSON handler escapes strings.
func appendEscaped(b []byte, s string) []byte { return jsonx.AppendEscaped(b, s, jsonx.Slog) }

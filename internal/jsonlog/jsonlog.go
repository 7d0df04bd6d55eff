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

// writeLine writes the line of t, level, msg and attrs from a pooled
// buffer, where this handler writes such a line (ok).
func (h *Handler) writeLine(t time.Time, level slog.Level, msg string, attrs []slog.Attr) (ok bool, err error) {
	bp := buffers.Get().(*[]byte)
	b, ok := h.appendLine((*bp)[:0], t, level, msg, attrs)
	if ok {
		_, err = h.out.Write(b)
	}
	putBuffer(bp, b)
	return ok, err
}

// putBuffer hands b, grown from *bp, back to the pool.
func putBuffer(bp *[]byte, b []byte) {
	if cap(b) <= 64<<10 { // a buffer grown past that is not worth keeping
		*bp = b
		buffers.Put(bp)
	}
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

// A Line is one log line built field by field: the line the gateway
// writes at every request. Where the logger's handler is this package's,
// each field is appended to the line as it comes — no attribute made, its
// key written as it is; with any other handler the fields are gathered as
// attributes and handed to the Logger. Keys are the caller's constants and
// must be plain names (letters, digits, '_', '-', '.'), which JSON writes
// unescaped; values are escaped as slog escapes them (TestSameBytesAsSlog
// writes its records as Lines too).
type Line struct {
	log   *slog.Logger
	h     *Handler // the logger's, where the line is written here
	t     time.Time
	level slog.Level
	msg   string
	bp    *[]byte // the pooled buffer, where the line is written here
	b     []byte
	attrs []slog.Attr // the fields, where it is not
	off   bool        // the level is not logged
}

// NewLine starts a line of level and msg, at the current time, for log.
func NewLine(ctx context.Context, log *slog.Logger, level slog.Level, msg string) Line {
	return lineAt(ctx, log, time.Now(), level, msg)
}

func lineAt(ctx context.Context, log *slog.Logger, t time.Time, level slog.Level, msg string) Line {
	if !log.Enabled(ctx, level) {
		return Line{off: true}
	}
	l := Line{log: log, t: t, level: level, msg: msg}
	if h, ok := log.Handler().(*Handler); ok {
		bp := buffers.Get().(*[]byte)
		b, ok := h.appendTime(append((*bp)[:0], `{"time":"`...), t)
		if !ok { // a year RFC 3339 cannot write: slog's handler says so
			buffers.Put(bp)
			return l
		}
		b = append(append(append(b, `","level":"`...), level.String()...), `","msg":"`...)
		l.h, l.bp, l.b = h, bp, append(appendEscaped(b, msg), '"')
	}
	return l
}

// String adds a string field.
func (l *Line) String(key, v string) {
	switch {
	case l.bp != nil:
		l.b = append(append(append(l.b, `,"`...), key...), `":"`...)
		l.b = append(appendEscaped(l.b, v), '"')
	case !l.off:
		l.attrs = append(l.attrs, slog.String(key, v))
	}
}

// Int64 adds an integer field.
func (l *Line) Int64(key string, v int64) {
	switch {
	case l.bp != nil:
		l.b = strconv.AppendInt(append(append(append(l.b, `,"`...), key...), `":`...), v, 10)
	case !l.off:
		l.attrs = append(l.attrs, slog.Int64(key, v))
	}
}

// Bool adds a boolean field.
func (l *Line) Bool(key string, v bool) {
	switch {
	case l.bp != nil:
		l.b = strconv.AppendBool(append(append(append(l.b, `,"`...), key...), `":`...), v)
	case !l.off:
		l.attrs = append(l.attrs, slog.Bool(key, v))
	}
}

// Write writes the line. The Line is spent.
func (l *Line) Write(ctx context.Context) {
	switch {
	case l.bp != nil:
		l.b = append(l.b, "}\n"...)
		_, _ = l.h.out.Write(l.b)
		putBuffer(l.bp, l.b)
		l.bp, l.b = nil, nil
	case !l.off:
		r := slog.NewRecord(l.t, l.level, l.msg, 0)
		r.AddAttrs(l.attrs...)
		_ = l.log.Handler().Handle(ctx, r)
	}
	l.off = true
}

// appendEscaped appends s escaped as slog's JSON handler escapes strings.
func appendEscaped(b []byte, s string) []byte { return jsonx.AppendEscaped(b, s, jsonx.Slog) }

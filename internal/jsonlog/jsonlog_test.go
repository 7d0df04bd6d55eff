package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSameBytesAsSlog: for random records — strings of every class of
// character (quotes, control characters, U+2028, bytes that are not
// UTF-8), integers, booleans, durations, times in several zones and
// seconds, and the kinds handed on (errors, floats, groups) — the handler
// writes exactly what slog.JSONHandler writes.
func TestSameBytesAsSlog(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("x", -(3*3600 + 30*60)), time.FixedZone("y", 5*3600+45*60)}
	pieces := []string{"a", "request", " ", `"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "世界", "😀", "\u2028", "\u2029", "\xff", "\xe2\x80", "<>&", "}"}
	str := func() string {
		var b []byte
		for range rng.IntN(6) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	base := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	var want, got bytes.Buffer
	ref := slog.NewJSONHandler(&want, nil)
	h := New(&got)
	fast, lines := 0, 0
	for i := range 20000 {
		tm := base.Add(time.Duration(rng.Int64N(int64(3 * time.Second)))).In(zones[rng.IntN(len(zones))])
		switch rng.IntN(10) {
		case 0:
			tm = tm.Truncate(time.Second)
		case 1:
			tm = tm.Truncate(time.Millisecond)
		case 2:
			tm = time.Time{}
		}
		r := slog.NewRecord(tm, slog.Level(rng.IntN(16)-4), str(), 0)
		for range rng.IntN(25) {
			key := str()
			if rng.IntN(4) == 0 {
				key = plainKeys[rng.IntN(len(plainKeys))]
			}
			if rng.IntN(100) != 0 {
				key = "k" + key // an empty key now and then: slog's handler writes it
			}
			switch rng.IntN(12) {
			case 0, 1, 2, 3:
				r.AddAttrs(slog.String(key, str()))
			case 4, 5:
				r.AddAttrs(slog.Int64(key, rng.Int64()-rng.Int64()))
			case 6:
				r.AddAttrs(slog.Uint64(key, rng.Uint64()))
			case 7:
				r.AddAttrs(slog.Bool(key, rng.IntN(2) == 0))
			case 8:
				r.AddAttrs(slog.Duration(key, time.Duration(rng.Int64N(1e12))))
			case 9:
				if rng.IntN(20) == 0 {
					r.AddAttrs(slog.Any(key, errors.New(str())))
				}
			case 10:
				if rng.IntN(20) == 0 {
					r.AddAttrs(slog.Float64(key, rng.Float64()))
				}
			case 11:
				if rng.IntN(20) == 0 {
					r.AddAttrs(slog.Group(key, slog.Int("n", 1)))
				}
			}
		}
		want.Reset()
		got.Reset()
		if err := ref.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got.Bytes(), want.Bytes())
		}
		// The same line from the attributes alone, as appendLine writes it.
		var attrs []slog.Attr
		r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
		if b, ok := h.appendLine(nil, r.Time, r.Level, r.Message, attrs); ok && len(b) > 0 {
			fast++
		}
		// And built field by field as a Line, where its keys are plain
		// and its values of a Line's kinds.
		if tm.IsZero() || !lineable(attrs) {
			continue
		}
		lines++
		got.Reset()
		l := lineAt(context.Background(), slog.New(h), tm, r.Level, r.Message)
		for _, a := range attrs {
			switch a.Value.Kind() {
			case slog.KindString:
				l.String(a.Key, a.Value.String())
			case slog.KindInt64:
				l.Int64(a.Key, a.Value.Int64())
			case slog.KindBool:
				l.Bool(a.Key, a.Value.Bool())
			}
		}
		l.Write(context.Background())
		if r.Level < slog.LevelInfo {
			if got.Len() != 0 {
				t.Fatalf("record %d: a line below Info was written: %s", i, got.Bytes())
			}
			continue
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("record %d as a Line:\n got %s\nwant %s", i, got.Bytes(), want.Bytes())
		}
	}
	if lines < 1000 {
		t.Errorf("only %d records were written as Lines", lines)
	}
	if fast < 15000 {
		t.Errorf("only %d of 20,000 records took the fast path", fast)
	}
}

// TestDerivedAndDisabled: levels below Info are not written, and a derived
// logger writes what slog's does.
func TestDerivedAndDisabled(t *testing.T) {
	var want, got bytes.Buffer
	ref := slog.New(slog.NewJSONHandler(&want, nil))
	l := slog.New(New(&got))
	for _, lg := range []*slog.Logger{ref, l} {
		lg.Debug("hidden")
		lg.With("component", "ledger").WithGroup("g").Info("shipped", "n", 3)
	}
	strip := func(b []byte) []byte { return bytes.SplitN(b, []byte(`"level"`), 2)[1] } // the times differ
	if !bytes.Equal(strip(got.Bytes()), strip(want.Bytes())) {
		t.Fatalf("got %s\nwant %s", got.Bytes(), want.Bytes())
	}
}

// plainKeys are keys a Line writes as they are.
var plainKeys = []string{"request_id", "usage_estimated", "a", "k-1.2", "X_Y"}

// lineable reports whether attrs can be written as a Line: plain keys,
// and strings, integers and booleans.
func lineable(attrs []slog.Attr) bool {
	for _, a := range attrs {
		switch a.Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindBool:
		default:
			return false
		}
		if a.Key == "" {
			return false
		}
		for _, c := range []byte(a.Key) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
				return false
			}
		}
	}
	return true
}

// TestLineAllocatesNothing: the request line is written at every request;
// building it takes no allocation of its own (the buffer is pooled, the
// fields are appended as they come).
func TestLineAllocatesNothing(t *testing.T) {
	log := slog.New(New(io.Discard))
	n := testing.AllocsPerRun(1000, func() {
		l := NewLine(context.Background(), log, slog.LevelInfo, "request")
		l.String("request_id", "R1")
		l.Int64("actual_usd_micros", 32)
		l.Bool("served", true)
		l.String("model", "gpt\n4o")
		l.Write(context.Background())
	})
	if n != 0 {
		t.Fatalf("a Line allocates %v times", n)
	}
}

// TestLineThroughAnotherHandler: with a handler not of this package, a
// Line's fields reach it as attributes of a record at the line's time; a
// level it does not log writes nothing.
func TestLineThroughAnotherHandler(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	tm := time.Date(2026, 12, 2, 1, 2, 3, 4000, time.UTC)
	l := lineAt(context.Background(), log, tm, slog.LevelInfo, "request")
	l.String("team", "search team")
	l.Int64("input_tokens", 28)
	l.Bool("served", true)
	l.Write(context.Background())
	if want := "time=2026-12-02T01:02:03.000Z level=INFO msg=request team=\"search team\" input_tokens=28 served=true\n"; out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
	out.Reset()
	l = NewLine(context.Background(), log, slog.LevelDebug, "hidden")
	l.String("k", "v")
	l.Write(context.Background())
	if out.Len() != 0 {
		t.Fatalf("a Debug line was written: %q", out.String())
	}
}

// TestEscapedEveryByteEveryPlace: each of the 256 byte values at each
// place of a 16-byte string is escaped as slog escapes it, whichever byte
// of the eight read at once it falls in.
func TestEscapedEveryByteEveryPlace(t *testing.T) {
	var want bytes.Buffer
	ref := slog.NewJSONHandler(&want, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
			return slog.Attr{}
		}
		return a
	}})
	for place := range 16 {
		for c := range 256 {
			s := []byte("abcdefghijklmnop")
			s[place] = byte(c)
			want.Reset()
			r := slog.NewRecord(time.Time{}, slog.LevelInfo, "", 0)
			r.AddAttrs(slog.String("k", string(s)))
			_ = ref.Handle(context.Background(), r)
			got := append(append([]byte(`{"k":"`), appendEscaped(nil, string(s))...), "\"}\n"...)
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("byte %#x at %d: got %s, want %s", c, place, got, want.Bytes())
			}
		}
	}
}

// BenchmarkRequestLine is the gateway's request line (internal/gateway's
// finish): seventeen attributes, written at every request.
func BenchmarkRequestLine(b *testing.B) {
	log := slog.New(New(io.Discard))
	ctx := context.Background()
	for b.Loop() {
		l := NewLine(ctx, log, slog.LevelInfo, "request")
		l.String("request_id", "7GTKKOERS7URLNS4EQLN")
		l.String("org", "acme")
		l.String("team", "search")
		l.String("key", "bench")
		l.String("model", "gpt-4o-mini")
		l.Bool("stream", false)
		l.String("reservation", "r-7GTKKOERS7URLNS4EQLN")
		l.String("outcome", "settled")
		l.String("degraded", "")
		l.String("bypass", "")
		l.Bool("served", true)
		l.Int64("estimate_usd_micros", 38)
		l.Int64("actual_usd_micros", 32)
		l.Int64("input_tokens", 28)
		l.Int64("output_tokens", 50)
		l.Bool("usage_estimated", false)
		l.Int64("duration_ms", 3)
		l.Write(ctx)
	}
}

package httpx

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/iotest"
)

func TestHeaders(t *testing.T) {
	h := http.Header{}
	s := NewHeaders(h, 2)
	s.Set("X-One", "1")
	s.Set("X-Two", "2")
	s.Set("X-Three", "3") // past the room asked for
	h.Add("X-One", "1b")
	if got := h.Values("X-One"); len(got) != 2 || got[0] != "1" || got[1] != "1b" {
		t.Fatalf("X-One = %q", got)
	}
	if h.Get("X-Two") != "2" || h.Get("X-Three") != "3" {
		t.Fatalf("an Add wrote into a neighbour: %v", h)
	}
	s.Set("X-Two", "2b")
	if got := h.Values("X-Two"); len(got) != 1 || got[0] != "2b" {
		t.Fatalf("Set did not replace: %q", got)
	}
	n := testing.AllocsPerRun(100, func() {
		s := NewHeaders(h, 4)
		s.Set("X-One", "a")
		s.Set("X-Two", "b")
		s.Set("X-Three", "c")
		s.Set("X-Four", "d")
	})
	if n != 1 {
		t.Fatalf("%v allocations for four headers, want one", n)
	}
}

// readers are the ways a body may arrive: at once, a byte at a time, half
// a buffer at a time, its last bytes together with io.EOF.
var readers = []func(io.Reader) io.Reader{
	func(r io.Reader) io.Reader { return r },
	iotest.OneByteReader,
	iotest.HalfReader,
	iotest.DataErrReader,
}

// FuzzReadAll: whatever a body declares, ReadAll returns what io.ReadAll
// of at most max+1 bytes does.
func FuzzReadAll(f *testing.F) {
	f.Add([]byte(`{"a":1}`), int64(7), int64(100), uint8(0))
	f.Add([]byte(`{"a":1}`), int64(3), int64(100), uint8(1))
	f.Add([]byte(`{"a":1}`), int64(50), int64(100), uint8(2))
	f.Add([]byte(`{"a":1}`), int64(7), int64(4), uint8(3))
	f.Add([]byte(`{"a":1}`), int64(-1), int64(5), uint8(0))
	f.Add([]byte{}, int64(0), int64(0), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, size, max int64, how uint8) {
		if max < 0 || max > 1<<20 || size > 1<<20 {
			return
		}
		wrap := readers[int(how)%len(readers)]
		want, werr := io.ReadAll(io.LimitReader(wrap(bytes.NewReader(body)), max+1))
		got, err := ReadAll(wrap(bytes.NewReader(body)), size, max)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("size %d max %d: got %q, %v; want %q, %v", size, max, got, err, want, werr)
		}
	})
}

func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(boom))
	got, err := ReadAll(r, 10, 100)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestReadAllOneBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3000)
	n := testing.AllocsPerRun(100, func() {
		_, _ = ReadAll(bytes.NewReader(body), int64(len(body)), 1<<20)
	})
	if n > 2 { // the buffer, and the reader's own
		t.Fatalf("%v allocations to read a body of known size", n)
	}
}

package convert_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// FuzzDecode: whatever an upstream streams, decoding never panics, every
// event is whole, and an encoder writes each without panicking.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		for _, ev := range strings.Split(string(raw), "\n\n") {
			for _, line := range strings.Split(ev, "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					f.Add(uint8(0), "", []byte(data))
					f.Add(uint8(2), "", []byte(data))
				}
			}
		}
	}
	f.Add(uint8(3), "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"a\":"}}}`))
	f.Add(uint8(3), "metadata", []byte(`{"usage":{"inputTokens":-5,"outputTokens":3}}`))
	f.Add(uint8(1), "", []byte(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1e300}}`))
	f.Fuzz(func(t *testing.T, wire uint8, name string, data []byte) {
		w := convert.Wire(wire%4 + 1)
		for _, format := range []string{"", convert.FormatTool} {
			dec := convert.NewDecoder(w, format)
			evs, err := dec.Decode(name, data)
			if err != nil {
				continue
			}
			for _, cw := range []convert.Wire{convert.OpenAI, convert.Anthropic} {
				enc := convert.NewEncoder(cw, "m", true)
				for _, ev := range evs {
					if ev.Kind == convert.EvToolStart && ev.Call == nil {
						t.Fatalf("a tool start without its call: %+v", ev)
					}
					enc.Encode(ev)
				}
				enc.End()
			}
		}
	})
}

// FuzzReply: whatever an upstream answers, reading it never panics and
// writing it in each client wire gives JSON.
func FuzzReply(f *testing.F) {
	files, _ := filepath.Glob("testdata/replies/*.json")
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		f.Add(uint8(0), raw)
		f.Add(uint8(1), raw)
		f.Add(uint8(2), raw)
		f.Add(uint8(3), raw)
	}
	f.Fuzz(func(t *testing.T, wire uint8, body []byte) {
		rep, err := convert.ReadReply(convert.Wire(wire%4+1), body, convert.FormatTool)
		if err != nil {
			return
		}
		for _, cw := range []convert.Wire{convert.OpenAI, convert.Anthropic} {
			out, err := convert.WriteReply(cw, rep, "m")
			if err != nil || !isJSON(out) {
				t.Fatalf("%s answer %q from %q: %v", cw, out, body, err)
			}
		}
	})
}

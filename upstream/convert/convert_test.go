package convert_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s:\n got: %s\nwant: %s", name, got, want)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// An upstream's answer, in each client wire: golden files under
// testdata/replies.
func TestReplies(t *testing.T) {
	for _, tc := range []struct {
		file string
		wire convert.Wire
	}{
		{"openai_tool.json", convert.OpenAI},
		{"anthropic_text.json", convert.Anthropic},
		{"gemini_call.json", convert.Gemini},
		{"converse_length.json", convert.Converse},
	} {
		body, err := os.ReadFile(filepath.Join("testdata/replies", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := convert.ReadReply(tc.wire, body, "")
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(tc.file, ".json")
		for _, cw := range []convert.Wire{convert.OpenAI, convert.Anthropic} {
			out, err := convert.WriteReply(cw, rep, "client-model")
			if err != nil {
				t.Fatal(err)
			}
			// The creation time is the clock's.
			var v map[string]any
			_ = json.Unmarshal(out, &v)
			delete(v, "created")
			out, _ = json.Marshal(v)
			golden(t, fmt.Sprintf("replies/%s.as_%s.golden", base, cw), indent(t, out))
		}
	}
}

// An upstream's stream, in each client wire: golden files under
// testdata/streams.
func TestStreams(t *testing.T) {
	for _, tc := range []struct {
		file string
		wire convert.Wire
	}{
		{"openai_tool.sse", convert.OpenAI},
		{"anthropic_text.sse", convert.Anthropic},
		{"gemini_call.sse", convert.Gemini},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata/streams", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, cw := range []convert.Wire{convert.OpenAI, convert.Anthropic} {
			src := upstream.NewEventSource(tc.wire, bytes.NewReader(raw))
			dec := convert.NewDecoder(tc.wire, "")
			enc := convert.NewEncoder(cw, "client-model", true)
			var out bytes.Buffer
			for {
				name, data, err := src.Next()
				evs, derr := dec.Decode(name, data)
				if derr != nil {
					t.Fatal(derr)
				}
				for _, ev := range evs {
					out.Write(enc.Encode(ev))
				}
				if err != nil {
					break
				}
			}
			out.Write(enc.End())
			golden(t, fmt.Sprintf("streams/%s.as_%s.golden", strings.TrimSuffix(tc.file, ".sse"), cw), stripCreated(out.Bytes()))
		}
	}
}

// stripCreated blanks OpenAI chunks' creation times, which are the clock's.
func stripCreated(b []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, `"created":`); i >= 0 {
			j := strings.IndexByte(line[i:], ',')
			line = line[:i] + `"created":0` + line[i+j:]
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

func isJSON(b []byte) bool { return json.Valid(b) }

// An upstream's error answer, as recorded from each provider (status,
// headers, body), in each client wire: golden files under testdata/errors
// hold the status and the body a client's SDK raises its typed error from.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		wire convert.Wire
	}{
		{"openai_400.http", convert.OpenAI},
		{"anthropic_529.http", convert.Anthropic},
		{"gemini_429.http", convert.Gemini},
		{"vertex_401.http", convert.Gemini},
		{"bedrock_400.http", convert.Converse},
		{"bedrock_429.http", convert.Converse},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata/errors", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		body, _ := io.ReadAll(resp.Body)
		msg := convert.ReadError(tc.wire, resp.Header, body)
		base := strings.TrimSuffix(tc.file, ".http")
		for _, cw := range []convert.Wire{convert.OpenAI, convert.Anthropic} {
			out := convert.WriteError(cw, resp.StatusCode, msg)
			golden(t, fmt.Sprintf("errors/%s.as_%s.golden", base, cw), append([]byte(fmt.Sprintf("%d\n", resp.StatusCode)), indent(t, out)...))
		}
	}
}

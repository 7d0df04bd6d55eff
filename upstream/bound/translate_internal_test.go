package bound

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// updating reports whether -update (declared by the package's external
// tests) asks for golden files to be rewritten.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// A client's request read into the canonical chat and written in each
// wire an upstream may speak: golden files under testdata/requests.
func TestTranslatedRequests(t *testing.T) {
	m := &Model{Name: "m", MaxOutputTokens: 4096, DefaultOutputTokens: 512}
	for _, tc := range []struct {
		file string
		ep   Endpoint
	}{
		{"openai_full.json", Chat},
		{"anthropic_full.json", Messages},
	} {
		body, err := os.ReadFile(filepath.Join("testdata/requests", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(tc.ep, body, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		var c *convert.Chat
		if tc.ep == Chat {
			c, _, err = r.read.(*chatRequest).canonical(m)
		} else {
			c, _, err = r.read.(*messagesRequest).canonical()
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		base := strings.TrimSuffix(tc.file, ".json")
		for _, w := range []struct {
			name  string
			write func(*convert.Chat) ([]byte, error)
		}{
			{"openai", func(c *convert.Chat) ([]byte, error) { return convert.ToOpenAI(c, "max_tokens", true) }},
			{"anthropic", func(c *convert.Chat) ([]byte, error) { return convert.ToAnthropic(c, nil) }},
			{"gemini", convert.ToGemini},
			{"converse", convert.ToConverse},
		} {
			out, err := w.write(c)
			if err != nil {
				t.Fatalf("%s as %s: %v", tc.file, w.name, err)
			}
			var ind bytes.Buffer
			if err := json.Indent(&ind, out, "", "  "); err != nil {
				t.Fatal(err)
			}
			ind.WriteByte('\n')
			path := filepath.Join("testdata/requests", base+".to_"+w.name+".golden")
			if updating() {
				if err := os.WriteFile(path, ind.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if want, err := os.ReadFile(path); err != nil || !bytes.Equal(ind.Bytes(), want) {
				t.Errorf("%s:\n got: %s\nwant: %s", path, ind.Bytes(), want)
			}
		}
	}
}

// writer is an upstream of another wire than every client's.
type writer struct{ wire convert.Wire }

func (writer) Serves(Endpoint) bool                             { return false }
func (w writer) Wire(string) convert.Wire                       { return w.wire }
func (writer) Encode(c *convert.Chat, _ *Model) ([]byte, error) { return convert.ToGemini(c) }

// What a client format requires is refused, naming the field, rather than
// defaulted or dropped in the target's body: a translation sends nothing
// the client did not, so the bound taken over the client's request holds.
func TestTranslationRefuses(t *testing.T) {
	m := &Model{Name: "m", MaxOutputTokens: 4096, DefaultOutputTokens: 512}
	for _, tc := range []struct {
		ep          Endpoint
		body, param string
	}{
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"x"}]}`, "messages[0].role"},
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`, "messages[0].content[0].content[0]"},
		{Messages, `{"model":"m","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"}]}`, "thinking"},
		{Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]}`, "tools[0].type"},
		{Chat, `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{Chat, `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, "logprobs"},
		{Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"c"}}]}`, "tools[0].type"},
		{Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":"no"}}}`, "response_format.json_schema.schema"},
		{Chat, `{"model":"m","messages":[{"role":"user","content":"x"}],"top_k":5}`, "top_k"},
	} {
		r, err := Parse(tc.ep, []byte(tc.body), nil)
		if err == nil {
			_, err = r.Prepare(m, writer{convert.Gemini})
		}
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tc.param {
			t.Errorf("%s: %v, want a refusal naming %s", tc.body, err, tc.param)
		}
	}
}

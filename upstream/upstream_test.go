package upstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

var update = flag.Bool("update", false, "rewrite golden files")

func model(t testing.TB, enc string) *upstream.Model {
	t.Helper()
	c, err := tokenizer.Load(enc)
	if err != nil {
		t.Fatal(err)
	}
	return &upstream.Model{Name: "m", Counter: c, MaxOutputTokens: 4096, DefaultOutputTokens: 512, ImageTokens: 1445, ImageTokensLow: 85}
}

// corpus is varied on purpose: CJK, emoji, code, long whitespace, names,
// tools, tool calls, images, several choices.
var corpus = []string{
	`{"model":"m","messages":[{"role":"user","content":"Hello!"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"你是一个有用的助手。请用中文回答。"},{"role":"user","content":"東京の天気は？ 오늘 날씨 어때요?"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"🙂🙃🤖👩‍👩‍👧‍👦🏳️‍🌈 emoji soup 🍜🍣🍱"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"func main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i)\n\t}\n}\n\n` + "```" + `python\ndef f(x):\n    return {k: v for k, v in x.items() if v}\n` + "```" + `"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat(" ", 500) + `x` + strings.Repeat(`\n\n\t  `, 200) + `"}]}`,
	`{"model":"m","messages":[{"role":"system","name":"example_user","content":"New synergies will help drive top-line growth."},{"role":"user","name":"bob","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"What's the weather in Paris and Tokyo?"}],"tools":[{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather in a given location","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21,\"sky\":\"clear\"}"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"high"}}]}]}`,
	`{"model":"m","n":3,"max_tokens":20,"messages":[{"role":"user","content":"Three haiku please"}]}`,
	`{"model":"m","stream":true,"messages":[{"role":"user","content":"stream it"}]}`,
}

// TestEstimateBoundsReportedUsage sends every prepared request to the
// simulated upstream, which counts as the API does, and checks the estimate
// is never below what it reports.
func TestEstimateBoundsReportedUsage(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		sim, err := simulated.New(simulated.Options{Encodings: map[string]string{"m": enc}, ReplyTokens: func(uint64) int64 { return 1 << 20 }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		defer srv.Close()
		m := model(t, enc)
		for i, body := range corpus {
			t.Run(fmt.Sprintf("%s/%d", enc, i), func(t *testing.T) {
				req, err := upstream.ParseRequest(upstream.Chat, []byte(body))
				if err != nil {
					t.Fatal(err)
				}
				p, err := req.Prepare(m)
				if err != nil {
					t.Fatal(err)
				}
				prompt, completion := reported(t, srv.URL, p.Body, req.Stream)
				if p.InputTokens < prompt {
					t.Errorf("input estimate %d < reported %d", p.InputTokens, prompt)
				}
				if p.MaxOutputTokens < completion {
					t.Errorf("output bound %d < reported %d", p.MaxOutputTokens, completion)
				}
				if !strings.Contains(body, "image_url") && p.InputTokens > prompt*2+20 {
					t.Errorf("input estimate %d is far above the reported %d", p.InputTokens, prompt)
				}
			})
		}
	}
}

func reported(t *testing.T, url string, body []byte, stream bool) (prompt, completion int64) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !stream {
		raw, _ := io.ReadAll(resp.Body)
		u, ok := upstream.UsageFromJSON(raw)
		if !ok {
			t.Fatalf("no usage in %s", raw)
		}
		return u.InputTokens, u.OutputTokens
	}
	meter := upstream.NewStreamMeter(1 << 20)
	events := upstream.NewEventReader(resp.Body)
	for {
		_, data, err := events.Next()
		if data != nil {
			if _, err := meter.Observe(data); err != nil {
				t.Fatal(err)
			}
		}
		if err != nil {
			break
		}
	}
	u, ok := meter.Usage()
	if !ok || !meter.Done() {
		t.Fatal("stream without usage or [DONE]")
	}
	return u.InputTokens, u.OutputTokens
}

// Golden files: testdata/rewrite/NAME.json holds an endpoint line, a client
// body, a "---" line and the body the gateway forwards.
func TestRewriteGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/rewrite/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	m := model(t, "o200k_base")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			head, want, ok := strings.Cut(string(data), "\n---\n")
			if !ok {
				t.Fatal("no --- separator")
			}
			epName, in, _ := strings.Cut(head, "\n")
			ep := map[string]upstream.Endpoint{"chat": upstream.Chat, "completions": upstream.Completions, "embeddings": upstream.Embeddings, "messages": upstream.Messages, "responses": upstream.Responses}[epName]
			req, err := upstream.ParseRequest(ep, []byte(in))
			if err != nil {
				t.Fatal(err)
			}
			mm := *m
			switch ep {
			case upstream.Embeddings:
				mm.Embedding, mm.MaxOutputTokens, mm.DefaultOutputTokens = true, 0, 0
			case upstream.Messages:
				mm.TokenRatio = 1.35
			}
			p, err := req.Prepare(&mm)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s\ninput_tokens=%d max_output_tokens=%d client_wants_usage=%v user=%q\n", p.Body, p.InputTokens, p.MaxOutputTokens, p.ClientWantsUsage, req.User)
			if *update {
				if err := os.WriteFile(f, []byte(head+"\n---\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("rewrite of %s:\n got: %s\nwant: %s", f, got, want)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	m := model(t, "o200k_base")
	for _, tc := range []struct {
		desc, body, param string
	}{
		{"array body", `[1,2]`, ""},
		{"model not a string", `{"model":5,"messages":[]}`, "model"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages"},
		{"message without role", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role"},
		{"n zero", `{"model":"m","n":0,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"n huge", `{"model":"m","n":1000,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"cap huge", `{"model":"m","max_tokens":1e300,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"stream not bool", `{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream"},
		{"bad stream options", `{"model":"m","stream":true,"stream_options":[],"messages":[{"role":"user","content":"x"}]}`, "stream_options"},
		{"file part without data", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, "messages[0].content[0]"},
		{"uploaded file", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0]"},
		{"file not a PDF", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/csv;base64,YSxi"}}]}]}`, "messages[0].content[0]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req, err := upstream.ParseRequest(upstream.Chat, []byte(tc.body))
			if err == nil {
				_, err = req.Prepare(m)
			}
			var re *upstream.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RequestError", err)
			}
			if re.Param != tc.param {
				t.Fatalf("param = %q, want %q", re.Param, tc.param)
			}
			if !strings.Contains(re.Message, re.Param) {
				t.Fatalf("message %q does not name its field %q", re.Message, re.Param)
			}
		})
	}
}

// Duplicate keys collapse to the value the gateway read, so the upstream
// cannot be sent a larger cap than was reserved.
func TestDuplicateKeysCannotSmuggleACap(t *testing.T) {
	m := model(t, "o200k_base")
	req, err := upstream.ParseRequest(upstream.Chat, []byte(`{"model":"m","max_tokens":10,"max_tokens":4000,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := req.Prepare(m)
	if err != nil {
		t.Fatal(err)
	}
	var fwd map[string]json.RawMessage
	if err := json.Unmarshal(p.Body, &fwd); err != nil {
		t.Fatal(err)
	}
	if string(fwd["max_tokens"]) != fmt.Sprint(p.MaxOutputTokens) {
		t.Fatalf("forwarded max_tokens %s, reserved %d", fwd["max_tokens"], p.MaxOutputTokens)
	}
	if bytes.Count(p.Body, []byte(`"max_tokens"`)) != 1 {
		t.Fatalf("forwarded body still has duplicate keys: %s", p.Body)
	}
}

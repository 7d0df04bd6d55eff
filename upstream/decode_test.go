package upstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
)

// FuzzDecodeMessages: where the hand decoders of messages and text parts
// answer, they answer what encoding/json does — the same fields, the same
// strings, the same raw values —, and refuse nothing it accepts... except
// by giving up, which sends the caller to encoding/json itself.
func FuzzDecodeMessages(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"role":"system","content":"Be brief.","name":"x"},{"role":"user","content":[{"type":"text","text":"a\u00e9\ud83d\ude00"}]}]`,
		`[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}],"content":null}]`,
		`[{"role":"tool","tool_call_id":"c","content":"42","refusal":"no","audio":{"id":"a"},"function_call":{"name":"f"}}]`,
		`[{"role":"user","role":"system"}]`, `[{"Role":"user"}]`, `[{"r\u006fle":"user"}]`, `[{"\u017fole":"x","name":null}]`,
		`[{"role":"\xff\xfe","content":"\"q\" \\ \n"}]`, `[null]`, `[1]`, `{}`, `[]`, `null`, `"s"`,
		`[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}}]}]`,
		`[{"role":"user","tool_calls":null}]`, `[{"role":"user","tool_calls":{}}]`, `[{"role":7}]`,
		`[{"type":"text","text":"x"},{"TYPE":"text"}]`, `[{"type":"text","text":null}]`, `[{"type":"text","type":"image_url"}]`,
		// Anthropic's messages and blocks.
		`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]`,
		`[{"type":"tool_use","id":"t","name":"f","input":{"a":[1,2]}},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"42"}],"is_error":false}]`,
		`[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"redacted_thinking","data":"xx"}]`,
		`[{"type":"document","source":{"type":"text","data":"d"},"title":"t"}]`, `[{"type":"text","Text":"x"}]`,
		`[{"type":"image","source":null}]`, `[{"role":"user","content":null,"Content":"x"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		asJSON(t, "decodeMessages", raw, decodeMessages)
		asJSON(t, "decodeAnthropicMessages", raw, decodeAnthropicMessages)
		asJSON(t, "decodeBlocks", raw, decodeBlocks)
		asJSON(t, "decodeTextParts", raw, decodeTextParts)
		if got, ok := jsonStr(raw); ok {
			var want string
			if err := json.Unmarshal(raw, &want); err != nil || got != want {
				t.Fatalf("jsonStr(%s) = %q, encoding/json: %q, %v", raw, got, want, err)
			}
		}
	})
}

// asJSON fails t where decode takes raw and reads it otherwise than
// json.Unmarshal does.
func asJSON[T any](t *testing.T, name string, raw []byte, decode func([]byte) (T, bool)) {
	t.Helper()
	got, ok := decode(raw)
	if !ok {
		return
	}
	var want T
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s took %s, encoding/json refuses it: %v", name, raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s(%s)\n got %#v\nwant %#v", name, raw, got, want)
	}
}

// TestDecodersTakeTheCommonShape: the fast path is the one taken by the
// requests clients send (else it would save nothing), and gives up where
// encoding/json's answer differs from a plain reading.
func TestDecodersTakeTheCommonShape(t *testing.T) {
	for raw, want := range map[string]bool{
		`[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"hi"}],"name":"n"}]`:               true,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]`: true,
		`[{"role":"user","role":"system"}]`: false, // a duplicate: encoding/json's last wins, and its merge rules
		`[{"Role":"user"}]`:                 false, // encoding/json folds case
		`[{"role":null}]`:                   false, // null leaves a string as it was
		`[null]`:                            false,
	} {
		if _, ok := decodeMessages([]byte(raw)); ok != want {
			t.Errorf("decodeMessages(%s): fast path %v, want %v", raw, ok, want)
		}
	}
	if _, ok := decodeTextParts([]byte(`[{"type":"text","text":"a"},{"text":"b","type":"input_text"}]`)); !ok {
		t.Error("text parts took the slow path")
	}
	if _, ok := decodeTextParts([]byte(`[{"type":"image_url","image_url":{"url":"u"}}]`)); ok {
		t.Error("an image part took the text parts' path")
	}
}

// FuzzDecodeUsage: the direct reading of a usage object answers what
// encoding/json's does, figures and refusals alike.
func FuzzDecodeUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":12,"completion_tokens":50,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0}}`,
		`{"prompt_tokens":1,"prompt_tokens":2}`, `{"Prompt_Tokens":3}`, `{"prompt_tokens":1.5}`, `{"prompt_tokens":1e2}`,
		`{"prompt_tokens":-1}`, `{"prompt_tokens":null}`, `{"completion_tokens":4}`, `{"prompt_tokens":"5"}`,
		`{"prompt_tokens":5,"prompt_tokens_details":null}`, `{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9}}`,
		`{"prompt_tokens":99999999999999999999}`, `{"pr\u006fmpt_tokens":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		v := root(raw)
		got, gotErr := decodeUsage(v)
		var w wireUsage
		want, wantErr := budget.Usage{}, json.Unmarshal(raw, &w)
		if wantErr == nil {
			want, wantErr = w.usage()
		}
		if (gotErr == nil) != (wantErr == nil) || got != want {
			t.Fatalf("decodeUsage(%s) = %+v, %v; encoding/json: %+v, %v", raw, got, gotErr, want, wantErr)
		}
	})
}

// FuzzUsageFlat: the one-pass reading of a usage object's common form
// accepts only valid JSON, and reads it as encoding/json does; on any
// text, JSON or not.
func FuzzUsageFlat(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":12,"completion_tokens":50,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0}}`,
		`{"prompt_tokens":50,"completion_tokens":80,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":4},"completion_tokens_details":{"reasoning_tokens":6,"audio_tokens":7}}`,
		` { "prompt_tokens" : 1 , "x" : { } } `, `{"prompt_tokens":1,"prompt_tokens":2}`, `{"Prompt_Tokens":3}`, `{"prompt_tokens":1.5}`,
		`{"prompt_tokens":-0}`, `{"prompt_tokens":01}`, `{"prompt_tokens":-}`, `{"prompt_tokens":1,}`, `{"prompt_tokens":1}}`,
		`{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9,"cached_tokens":1}}`, `{"prompt_tokens":5,"completion_tokens_details":{}}`,
		`{"prompt_tokens":123456789012345678}`, `{"prompt_tokens":1234567890123456789}`, `{"completion_tokens":4}`, `{}`, `{"":1}`,
		`{"prompt_tokens":2,"z":{"a":1,"b":-2}}`, `{"prompt_tokens":2,"z":{"a":{}}}`, `{"prompt_tokens":2` + "\t" + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := usageFlat(string(raw))
		if !ok {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("usageFlat read %q, which is not JSON", raw)
		}
		var w wireUsage
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatalf("usageFlat read %s; encoding/json: %v", raw, err)
		}
		// What either reading makes of it: the same usage, or both refused
		// (no prompt_tokens, negative or inconsistent figures).
		want, wantErr := w.usage()
		gotErr := got.Validate()
		if (gotErr == nil) != (wantErr == nil) || wantErr == nil && got != want {
			t.Fatalf("usageFlat(%s) = %+v, %v; encoding/json: %+v, %v", raw, got, gotErr, want, wantErr)
		}
	})
}

// FuzzValidJSON: validJSON is json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `[`, `]`, `{"a":1,}`, `01`, `-`, `1.`, `1e`, `-0.5E+3`,
		`"\x01"`, `"\ud800"`, `"\q"`, `"\xff"`, " \t\r\n[] ", `tru`, `nulls`, `{"a" 1}`, `[1 2]`, `"`, `"\"`, `{"]":"["}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid: %v", b, got, want)
		}
	})
}

// TestValidJSONDepth: nesting up to encoding/json's limit is valid, one
// more is not — and is refused before gjson's recursion sees it.
func TestValidJSONDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1, 1 << 20} {
		b := append(bytes.Repeat([]byte("["), n), bytes.Repeat([]byte("]"), n)...)
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Errorf("depth %d: validJSON %v, json.Valid %v", n, got, want)
		}
		o := []byte(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
		if got, want := validJSON(o), json.Valid(o); got != want {
			t.Errorf("object depth %d: validJSON %v, json.Valid %v", n, got, want)
		}
	}
}

// FuzzKeepStrings: on any JSON chunk, the one-pass scan keeps exactly the
// string values of text keys, at every depth, in document order — what a
// full parse finds.
func FuzzKeepStrings(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":"x \"content\": \"y\"","refusal":null},"logprobs":{"content":[{"token":"a"}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"get","arguments":"{\"q\":1}"}}]}}]}`,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"\u00e9\\"}}`, `{"text" : "a", "name":{"text":"b"}}`,
		`["content", {"content": "c"}, "text"]`, `{"content":"x\/y","thinking":"t","partial_json":"{\"a\""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chunk []byte) {
		if !json.Valid(chunk) {
			return
		}
		var want strings.Builder
		var walk func(v gjson.Result)
		walk = func(v gjson.Result) {
			v.ForEach(func(k, val gjson.Result) bool {
				if k.Type == gjson.String && isTextKey([]byte(k.Raw[1:len(k.Raw)-1])) && val.Type == gjson.String {
					var s string
					if err := json.Unmarshal([]byte(val.Raw), &s); err != nil {
						t.Fatal(err)
					}
					want.WriteString(s)
				}
				if val.IsObject() || val.IsArray() {
					walk(val)
				}
				return true
			})
		}
		if root := gjson.ParseBytes(chunk); root.IsObject() || root.IsArray() {
			walk(root)
		}
		m := NewStreamMeter(1 << 20)
		m.keepStrings(chunk)
		// Bytes that are not UTF-8 are kept as they come, where
		// encoding/json decodes U+FFFD: the counter reads them as it.
		if got := runesOf(m.Text()); got != want.String() {
			t.Fatalf("keepStrings(%s) kept %q, want %q", chunk, got, want.String())
		}
	})
}

// runesOf is s with each byte that is not UTF-8 replaced by U+FFFD, as
// the token counter reads text.
func runesOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzKeepStringsInSequence: a meter that skips the head a chunk shares
// with the one before keeps what scanning each chunk afresh keeps, for any
// bytes: b is a's first cut bytes followed by tail, as the chunks of one
// stream share their head.
func FuzzKeepStringsInSequence(f *testing.F) {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`
	f.Add([]byte(head+`Hello"},"finish_reason":null}]}`), uint16(len(head)), []byte(` world"},"finish_reason":null}]}`))
	f.Add([]byte(head+`a"}}]}`), uint16(len(head)-3), []byte(`nt":"b","text":"c"}}]}`))
	f.Add([]byte(`{"name":"x","content":"y"}`), uint16(3), []byte(`me":"x","content":"y"}`))
	f.Add([]byte(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`), uint16(60), []byte(`xt":"b\"c"}}`))
	// Chunks that share their tail after the first value, up to the last
	// value's quote (OpenAI's obfuscation): the later ones skip it.
	obf := `"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"`
	f.Add([]byte(head+`Hello`+obf+`k2V"}`), uint16(len(head)), []byte(` world`+obf+`pA9WC"}`))
	f.Add([]byte(head+`Hello`+obf+`k2V"}`), uint16(len(head)), []byte(` world`+obf+`p","content":"more","x":"y"}`))
	f.Add([]byte(head+`Hello"},"refusal":"no",`+obf[3:]+`k2V"}`), uint16(len(head)), []byte(` world"},"refusal":"no",`+obf[3:]+`Z"}`))
	f.Fuzz(func(t *testing.T, a []byte, cut uint16, tail []byte) {
		b := append(a[:int(cut)%(len(a)+1):int(cut)%(len(a)+1)], tail...)
		want := func(chunks ...[]byte) string {
			var s string
			for _, c := range chunks {
				m := NewStreamMeter(1 << 20)
				m.keepStrings(c)
				s += m.Text()
			}
			return s
		}(a, b, b, a)
		m := NewStreamMeter(1 << 20)
		for _, c := range [][]byte{a, b, b, a} {
			m.keepStrings(c)
		}
		if got := m.Text(); got != want {
			t.Fatalf("chunks %q then %q kept %q, one by one %q", a, b, got, want)
		}
	})
}

// FuzzCheckMessages: checking a chat request's messages by decoding them
// (checkMessages) refuses exactly what the shape's own walk refuses, with
// the same parameter named; and what it decodes is what the estimate
// would have decoded.
func FuzzCheckMessages(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","content":"hi"}]`, `[{"role":"user","Content":"hi"}]`, `[{"ROLE":"user"}]`,
		`[{"role":"user","content":"x","Content":"y"}]`, `[{"r\u006fle":"user"}]`, `[{"\u017fole":"x"}]`,
		`[{"role":"user","content":[{"type":"text","text":"","TEXT":"long"}]}]`,
		`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","Detail":"high"}}]}]`,
		`[{"role":"user","content":{"type":"text","Text":"x"}}]`, `[{"role":"user","role":"system"}]`,
		`[{"role":"user","tool_calls":[{"Type":"f"}],"Tool_Calls":[]}]`, `{"role":"user","Name":"x"}`,
		`[1,{"role":"user","Audio":{}}]`, `[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"x","Refusal":"n"}]`,
		`[]`, `null`, `"x"`, `[{"role":"user","content":[[{"TYPE":"x"}]]}]`, `[{"role":"user","x-Role":1,"other":{"Content":2}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		v := root(raw)
		want := chatMsgShape.check(v, "messages", -1)
		var r Request
		got := r.checkMessages(v)
		if (got == nil) != (want == nil) {
			t.Fatalf("%s: checkMessages %v, the shape's walk %v", raw, got, want)
		}
		if got != nil {
			g, w := got.(*RequestError), want.(*RequestError)
			if g.Param != w.Param || g.Message != w.Message {
				t.Fatalf("%s: checkMessages refuses %q (%s), the shape's walk %q (%s)", raw, g.Param, g.Message, w.Param, w.Message)
			}
			return
		}
		if r.msgsOf != "" {
			var msgs []chatMessage
			if err := json.Unmarshal(raw, &msgs); err != nil || !reflect.DeepEqual(msgs, r.msgs) && !(len(msgs) == 0 && len(r.msgs) == 0) {
				t.Fatalf("%s: checkMessages decoded %+v, encoding/json %+v (%v)", raw, r.msgs, msgs, err)
			}
		}
	})
}

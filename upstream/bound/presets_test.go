package bound_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// A server that reads only max_tokens gets the cap there, whatever field
// the client used: a cap it ignored would leave the output unbounded.
func TestACapFieldPresetMovesTheCap(t *testing.T) {
	m := model(t, "o200k_base")
	m.CapField = "max_tokens"
	for _, tc := range []struct {
		desc, body string
		want       int64
	}{
		{"no cap: the default, in max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 512},
		{"max_completion_tokens moves", `{"model":"m","max_completion_tokens":77,"messages":[{"role":"user","content":"hi"}]}`, 77},
		{"max_tokens stays", `{"model":"m","max_tokens":66,"messages":[{"role":"user","content":"hi"}]}`, 66},
	} {
		p, err := prepare(t, m, bound.Chat, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		body := gjson.ParseBytes(p.Body)
		if body.Get("max_tokens").Int() != tc.want || body.Get("max_completion_tokens").Exists() || p.OutputCap != tc.want {
			t.Errorf("%s: forwarded %s (cap %d)", tc.desc, p.Body, p.OutputCap)
		}
	}
}

// A server whose streams carry usage unasked gets no stream_options (it
// may refuse the field), and the client gets the usage as it comes.
func TestAnUnaskedUsagePresetSendsNoStreamOptions(t *testing.T) {
	for _, mode := range []string{"always", "x_groq"} {
		m := model(t, "o200k_base")
		m.StreamUsage = mode
		p, err := prepare(t, m, bound.Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(p.Body), "stream_options") || !p.ClientWantsUsage {
			t.Errorf("%s: forwarded %s, client wants usage %v", mode, p.Body, p.ClientWantsUsage)
		}
	}
}

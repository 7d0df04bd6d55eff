package upstream

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// refuseUnbounded refuses the fields of r that make the upstream bill
// something the gateway's price table cannot bound: a dearer service tier,
// audio output, hosted search, server-side tools and containers. The README
// ("How an estimate becomes an upper bound") lists every field of each
// API and how it is bounded; this is the "refused" column.
func (r *Request) refuseUnbounded(m *Model) error {
	// (gjson is asked only of fields that are there: on nothing, it still
	// parses its path.)
	if raw := r.fields.raw("service_tier"); len(raw) > 0 && gjson.GetBytes(raw, "@this").String() == "priority" {
		return badRequest("service_tier", `service_tier "priority" bills above the model's list price; the gateway prices standard processing only`)
	}
	switch r.Endpoint {
	case Chat:
		if r.asksAudio() && !m.AudioOutput {
			return badRequest("audio", "audio output is billed at audio token prices, which the model %s has none of (set models.%s.output_audio); ask for text", m.Name, m.Name)
		}
		if present(r.fields.raw("web_search_options")) {
			return badRequest("web_search_options", "web_search_options bills per search, which the gateway cannot bound")
		}
		// messages[].audio is refused where the messages are read (chatInput).
	case Messages:
		if present(r.fields.raw("mcp_servers")) {
			return badRequest("mcp_servers", "mcp_servers run tools at the provider, whose results the gateway cannot bound")
		}
		if present(r.fields.raw("container")) {
			return badRequest("container", "container bills code execution time, which the gateway cannot bound")
		}
		return eachElem(r.fields.raw("tools"), func(i int, tool jnode) error {
			if t := tool.get("type").text(); serverTool(t) {
				param := fmt.Sprintf("tools[%d].type", i)
				return badRequest(param, "%s: %q is a server tool billed by its own rules (searches, fetched pages, execution time); the gateway cannot bound it", param, t)
			}
			return nil
		})
	}
	return nil
}

// eachElem calls fn with each element of a JSON array and its index, until
// fn returns an error.
func eachElem(raw json.RawMessage, fn func(i int, v jnode) error) error {
	i := 0
	for v := range root(raw).elements() {
		if err := fn(i, v); err != nil {
			return err
		}
		i++
	}
	return nil
}

// serverTool reports whether an Anthropic tool type runs at the provider.
// Client tools have no type, "custom", or one of the schema-less client tools
// (bash, text editor, computer), which are counted as input.
func serverTool(t string) bool {
	for _, prefix := range []string{"web_search", "web_fetch", "code_execution", "mcp", "tool_search"} {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}

// present reports whether a field is set: not missing, not null, not an
// empty list. An empty object is set (web_search_options: {} searches).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !isNull(raw) && strings.TrimSpace(string(raw)) != "[]"
}

// predicted is the output a chat request's predicted output can add: the
// provider bills the prediction's rejected tokens as output, on top of the
// cap, so the whole prediction is added to the bound.
func (r *Request) predicted(m *Model) int64 {
	raw, ok := r.fields.get("prediction")
	if !ok || r.Endpoint != Chat {
		return 0
	}
	content := gjson.GetBytes(raw, "content")
	if content.Type == gjson.String {
		return m.Counter.Count(content.String())
	}
	var n int64
	content.ForEach(func(_, part gjson.Result) bool {
		n += m.Counter.Count(part.Get("text").String())
		return true
	})
	if n == 0 && present(raw) {
		n = m.Counter.Count(string(compact(raw))) // an odd shape: its text bounds it
	}
	return n
}

// asksAudio reports whether a chat request asks for audio output.
func (r *Request) asksAudio() bool {
	if present(r.fields.raw("audio")) {
		return true
	}
	m := r.fields.raw("modalities")
	return len(m) > 0 && gjson.GetBytes(m, `#(=="audio")`).Exists()
}

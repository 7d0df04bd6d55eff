package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP collector in the test's process: it decodes
// what the exporter posts to /v1/traces, as a real collector does.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // the resource's attributes
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			o.attrs[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// One span per request, a child per step, the caller's trace continued,
// and the upstream span handed to the upstream as its traceparent.
func TestTracesOverOTLP(t *testing.T) {
	rcv := &otlpReceiver{attrs: map[string]string{}}
	collector := httptest.NewServer(rcv)
	defer collector.Close()
	h := startWith(t, setup{
		teamLimits:    monthlyTen,
		topExtra:      "tracing: {otlp_endpoint: \"" + collector.URL + "\", service_name: tollgate-test}\n",
		upstreamExtra: "    queue: {rate: 1000, max_length: 10, max_wait: 2s}\n",
	})
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(chatBody(1, false)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp)
	}
	resp.Body.Close()
	// A refused one: its span says so.
	if status, _, _, _ := sendAs(http.DefaultClient, h.url, "tg-wrong", chatBody(2, false)); status != 401 {
		t.Fatalf("wrong key: %d", status)
	}
	// A client has its answer before the handler settles and returns (and
	// ends the request's span): the server's Close waits for the handlers,
	// then the app's flushes the batch.
	h.servers[0].Close()
	if err := h.app.Close(); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.attrs["service.name"] != "tollgate-test" {
		t.Errorf("resource %v", rcv.attrs)
	}
	traceID := "4bf92f3577b34da6a3ce929d0e0e4736"
	byName := map[string]*tracepb.Span{}
	for _, s := range rcv.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			byName[s.GetName()] = s
		}
	}
	root := byName["POST /v1/chat/completions"]
	if root == nil || hex.EncodeToString(root.GetParentSpanId()) != "00f067aa0ba902b7" || root.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no server span continuing the caller's trace: %v", names(rcv.spans))
	}
	for _, step := range []string{"auth", "estimate", "reserve", "queue", "upstream", "settle"} {
		s := byName[step]
		if s == nil || !bytes.Equal(s.GetParentSpanId(), root.GetSpanId()) {
			t.Errorf("step %s: %v (spans %v)", step, s, names(rcv.spans))
		}
	}
	if status := attrInt(root, "http.response.status_code"); status != 200 {
		t.Errorf("root status %d", status)
	}
	// The upstream saw the upstream span as its parent.
	h.upMu.Lock()
	tp := h.upHeader.Get("traceparent")
	h.upMu.Unlock()
	if up := byName["upstream"]; up == nil || tp != "00-"+traceID+"-"+hex.EncodeToString(up.GetSpanId())+"-01" {
		t.Errorf("traceparent at the upstream %q", tp)
	}
	// The refused request has its own trace, with its 401.
	found := false
	for _, s := range rcv.spans {
		if s.GetName() == "POST /v1/chat/completions" && attrInt(s, "http.response.status_code") == 401 {
			found = true
		}
	}
	if !found {
		t.Error("no span for the refused request")
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
}

func attrInt(s *tracepb.Span, key string) int64 {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetIntValue()
		}
	}
	return 0
}

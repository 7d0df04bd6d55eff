package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// relayTranslated writes the answer of an upstream that speaks another
// wire than the client in the client's: its refusal or failure, its whole
// answer, or its stream event by event.
func (g *Gateway) relayTranslated(rctx context.Context, cl *Call, p *plan, a *attempt, w http.ResponseWriter) (u budget.Usage, served bool, fail, err error) {
	tr, resp := p.prep.Translation, a.resp
	if resp.StatusCode != http.StatusOK {
		return u, false, failedWith(resp.StatusCode), a.fail(p).relay(w)
	}
	if cl.llm.Stream && upstream.IsStream(tr.Upstream, resp.Header.Get("Content-Type")) {
		body := a.x.stream(resp.Body, p.dep.target.idle)
		u := g.streamTranslated(rctx, cl, p, w, upstream.NewEventSource(tr.Upstream, body), a.x)
		return u, true, streamFailure(a.x), nil
	}
	return g.copyTranslated(cl, p, w, resp, a.x), true, streamFailure(a.x), nil
}

// copyTranslated relays a whole answer, written in the client's wire (and
// watched for quiet, as copyJSON's).
func (g *Gateway) copyTranslated(cl *Call, p *plan, w http.ResponseWriter, resp *http.Response, x *exchange) budget.Usage {
	tr := p.prep.Translation
	body, err := io.ReadAll(io.LimitReader(x.stream(resp.Body, p.dep.target.idle), maxResponseBytes+1))
	var rep *convert.Reply
	if err == nil && len(body) <= maxResponseBytes {
		rep, err = convert.ReadReply(tr.Upstream, body, tr.FormatTool)
	}
	var out []byte
	if err == nil {
		out, err = convert.WriteReply(tr.Client, rep, tr.ClientModel)
	}
	if err != nil {
		// The upstream answered (and bills): the client is told the answer
		// could not be read, and the request is charged its reservation.
		g.log.Error("reading a translated answer; charging the reservation", "request_id", cl.id, "upstream", p.dep.target.name, "err", err)
		cl.abandoned = x.why()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(convert.WriteError(tr.Client, http.StatusBadGateway, "The upstream's answer could not be translated."))
		return cl.reservedUsage(p)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	flush(w)
	if rep.Usage.Reported() {
		return g.charge(cl, p, rep.Usage)
	}
	g.log.Warn("upstream reported no usage; charging the reservation", "request_id", cl.id)
	return cl.reservedUsage(p)
}

// streamTranslated relays a stream in the client's wire: each upstream
// event is read into canonical events, each written out as the client's.
// The output is counted as it passes, and the stream settled, as for a
// stream relayed as it is (stream).
func (g *Gateway) streamTranslated(ctx context.Context, cl *Call, p *plan, w http.ResponseWriter, src upstream.EventSource, x *exchange) budget.Usage {
	tr := p.prep.Translation
	startStream(w)
	dec := convert.NewDecoder(tr.Upstream, tr.FormatTool)
	enc := convert.NewEncoder(tr.Client, tr.ClientModel, tr.IncludeUsage)
	text := keptText{max: maxText(p)}
	count := outputCount{counter: p.dep.model.Counter.Estimate(), bound: p.prep.MaxOutputTokens}
	lease := g.leaseKeeper(ctx, cl)
	var usage convert.Usage
	stopped := false
	relaying := true // until a write fails: the client left
	for {
		name, data, err := src.Next()
		if len(data) > 0 {
			evs, derr := dec.Decode(name, data)
			if derr != nil {
				g.log.Warn("malformed stream event", "request_id", cl.id, "err", derr)
			}
			for _, ev := range evs {
				switch ev.Kind {
				case convert.EvUsage:
					usage = ev.Usage
				case convert.EvStop:
					stopped = true
				case convert.EvText, convert.EvThinking, convert.EvToolArgs:
					text.keep(ev.Text)
				case convert.EvToolStart:
					text.keep(ev.Call.Name)
				}
				if count.over(&text) {
					g.endOverrun(w, cl, p, upstream.OverrunEvent(p.req.Endpoint, overrunMessage(p)), count.counted)
					x.cut()
					cl.abandoned = causeOverrun
					return cl.reservedUsage(p)
				}
				if out := enc.Encode(ev); len(out) > 0 && relaying {
					if _, werr := w.Write(out); werr != nil {
						relaying = false
						g.log.Info("client left a stream; reading it to its usage", "request_id", cl.id)
					}
				}
			}
			if relaying && src.Buffered() == 0 {
				flush(w)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && stopped {
				_, _ = w.Write(enc.End())
			} else if !errors.Is(err, io.EOF) {
				g.log.Warn("stream ended early", "request_id", cl.id, "err", err)
			}
			flush(w)
			break
		}
		lease.keep(src.Buffered() == 0)
	}
	// A cut stream's report is not yet its whole output: the usage counts
	// once the stream came to its end.
	if usage.Reported() && stopped {
		return g.charge(cl, p, usage)
	}
	return g.unreported(cl, p, x)
}

// keptText keeps a stream's output text up to max bytes.
type keptText struct {
	strings.Builder
	max       int
	truncated bool
}

// Text and Truncated make keptText an outputText.
func (k *keptText) Text() string    { return k.String() }
func (k *keptText) Truncated() bool { return k.truncated }

func (k *keptText) keep(s string) {
	if room := k.max - k.Len(); len(s) > room {
		k.truncated = true
		s = s[:max(room, 0)]
	}
	k.WriteString(s)
}

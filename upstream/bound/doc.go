// Package bound is the upper bound of one request: what the upstream may
// bill for a body a client sent, computed before the body is forwarded.
// Read it in this order:
//
//   - read.go: the one reading of a body. Names match exactly, a name twice
//     in one object is refused at any depth, and an object member the
//     gateway does not know is refused — so that whatever it forwards, the
//     upstream reads as the gateway did (a Go server's case-folding, a
//     Python server's last duplicate, any server's ignoring of unknown
//     fields all agree with it on every accepted body).
//   - chat.go, completions.go, messages.go, responses.go: each endpoint's
//     body as a Go type — the allow-list, field by field, each field
//     marked bounded, free or refused — and its input counted.
//   - media.go: images, PDF pages, audio.
//   - prepare.go: Request.Prepare, the entry point. A parsed request and a
//     deployment's model in; the body to forward, its upper bound
//     (Prepared) or a *RequestError out.
//   - translate.go: a request for an upstream of another wire, bounded as
//     the same reading written out in that wire.
//   - headers.go: the headers forwarded with a body (Anthropic's betas).
//   - fit.go: the largest output cap that fits what a budget has left.
//   - usage.go: what the upstream reports it billed, per wire, each figure
//     with whether it was reported at all.
//
// It imports the tokenizer, the canonical chat (convert) and budget's
// prices; never a store, HTTP handlers or the gateway.
package bound

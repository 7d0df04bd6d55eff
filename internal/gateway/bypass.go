package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
)

// bypass verifies signed limit bypasses.
type bypass struct {
	secrets map[string][]byte // id → secret
	window  time.Duration
}

func newBypass(c config.Bypass) *bypass {
	b := &bypass{secrets: map[string][]byte{}, window: c.Window}
	for _, s := range c.Secrets {
		b.secrets[s.ID] = []byte(s.Secret)
	}
	return b
}

// Sign returns the header value for a request: what an internal service
// computes (and what tests use). target is the request target exactly as
// sent: the path and, if any, "?" and the query, percent-encoding as is
// (Go: URL.RequestURI()). The signed string is
//
//	METHOD "\n" target "\n" hex(sha256(body)) "\n" unix-seconds "\n" nonce
//
// so a signature for one query string does not verify with another.
func Sign(secret []byte, method, target string, body []byte, at time.Time, nonce string) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return "t=" + ts + ",n=" + nonce + ",s=" + hex.EncodeToString(mac(secret, method, target, body, ts, nonce))
}

func mac(secret []byte, method, target string, body []byte, ts, nonce string) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(method + "\n" + target + "\n" + hex.EncodeToString(sum[:]) + "\n" + ts + "\n" + nonce))
	return m.Sum(nil)
}

// verify checks a signature header against the request and returns the id
// of the secret that signed it. The nonce is then spent through the budget
// store (a claim that stands past the window), so a replay to any instance
// fails.
func (g *Gateway) verifyBypass(ctx context.Context, b *bypass, header, method, target string, body []byte, now time.Time) (string, error) {
	var ts, nonce, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "n":
			nonce = v
		case "s":
			sig = v
		}
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || nonce == "" || len(nonce) > 128 || sig == "" {
		return "", ErrBadSignature
	}
	if skew := now.Sub(time.Unix(at, 0)); skew > b.window || skew < -b.window {
		return "", ErrBadSignature
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return "", ErrBadSignature
	}
	id := ""
	for name, secret := range b.secrets {
		if hmac.Equal(got, mac(secret, method, target, body, ts, nonce)) {
			id = name
		}
	}
	if id == "" {
		return "", ErrBadSignature
	}
	fresh, err := g.engine.Claim(ctx, "_bypass", "nonce:"+id+":"+nonce, 3*b.window)
	if err != nil {
		return "", err
	}
	if !fresh {
		return "", ErrBadSignature // replayed
	}
	return id, nil
}

// bypass lets a signed request or an unlimited key past every limit: each
// still evaluates (and is charged where it fits) but none refuses, and
// the request is metered and priced as usual. A signature that does not
// verify is the error.
func (g *Gateway) bypass(ctx context.Context, cl *Call, body []byte) error {
	sig := cl.req.Signature
	if sig == "" && !cl.principal.Unlimited() {
		return nil
	}
	who := "unlimited-key"
	if sig != "" {
		id, err := g.verifyBypass(ctx, cl.settings.bypass, sig, cl.req.Method, cl.req.Target, body, g.now())
		if err != nil {
			g.log.Warn("bypass refused", "request_id", cl.id, "team", cl.principal.Team, "key", cl.principal.Key, "err", err)
			return err
		}
		who = id
	}
	cl.limits = shadowed(cl.limits)
	cl.bypass = who
	g.metrics.Bypasses.WithLabelValues(who, cl.principal.Team).Inc()
	g.log.Warn("limits bypassed", "request_id", cl.id, "by", who, "team", cl.principal.Team, "key", cl.principal.Key, "model", cl.model)
	return nil
}

// shadowed returns limits that are all evaluated and never enforced.
func shadowed(limits []budget.Limit) []budget.Limit {
	out := make([]budget.Limit, len(limits))
	for i, l := range limits {
		l.Shadow = true
		out[i] = l
	}
	return out
}

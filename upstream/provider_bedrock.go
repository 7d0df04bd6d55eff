package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/upstream/bound"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// bedrock is Amazon Bedrock's runtime: Converse and ConverseStream (AWS
// event-stream frames), each request signed with SigV4 by the AWS SDK's
// signer — or authorised with a Bedrock API key as a bearer token.
type bedrock struct {
	base   string
	region string
	key    string // a Bedrock API key, when there are no AWS credentials
	creds  aws.Credentials
	signer *v4.Signer
	now    func() time.Time
}

func newBedrock(base string, c ProviderConfig) (*bedrock, error) {
	if c.Region == "" {
		return nil, errors.New("upstream: a bedrock upstream needs its region")
	}
	if base == "" {
		base = "https://bedrock-runtime." + c.Region + ".amazonaws.com"
	}
	p := &bedrock{base: base, region: c.Region, key: c.APIKey, signer: v4.NewSigner(), now: time.Now,
		creds: aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretKey, SessionToken: c.SessionToken}}
	if p.key == "" && (c.AccessKeyID == "" || c.SecretKey == "") {
		return nil, errors.New("upstream: a bedrock upstream needs access_key_id and secret_access_key, or api_key")
	}
	return p, nil
}

func (*bedrock) Kind() string { return "bedrock" }

func (*bedrock) Serves(bound.Endpoint) bool { return false }

func (p *bedrock) URL(_ bound.Endpoint, model string, stream bool) string {
	op := "/converse"
	if stream {
		op = "/converse-stream"
	}
	// As the AWS SDK does, the colon of a versioned model id
	// (anthropic.claude-…-v1:0) is escaped too.
	return p.base + "/model/" + strings.ReplaceAll(url.PathEscape(model), ":", "%3A") + op
}

func (p *bedrock) Header(out, _ http.Header) {
	if p.key != "" && p.creds.AccessKeyID == "" {
		out.Set("Authorization", "Bearer "+p.key)
	}
}

// Sign signs req with SigV4 for the bedrock service: the body's hash, the
// host, the date and the content type are signed.
func (p *bedrock) Sign(ctx context.Context, req *http.Request, body []byte) error {
	if p.creds.AccessKeyID == "" {
		return nil // a bearer API key, set by Header
	}
	return p.signer.SignHTTP(ctx, p.creds, req, hashHex(body), "bedrock", p.region, p.now())
}

func (*bedrock) Wire(string) convert.Wire { return convert.Converse }

func (*bedrock) Encode(c *convert.Chat, _ *bound.Model) ([]byte, error) { return convert.ToConverse(c) }

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

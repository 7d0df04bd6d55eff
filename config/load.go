package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, decodes, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes data strictly (unknown fields and type mismatches are errors
// with line numbers), expands ${VAR} in the fields that allow it with lookup,
// applies defaults and validates. Every problem found is reported, each with
// its line.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	v := &validator{root: &root}
	c.expandEnv(v, lookup)
	c.SetDefaults()
	c.validate(v)
	if err := v.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} in the fields meant for secrets and addresses.
// Expansion happens after parsing, so a variable's value can never change
// the file's structure.
func (c *Config) expandEnv(v *validator, lookup func(string) (string, bool)) {
	expand := func(path string, s *string) {
		*s = envRef.ReplaceAllStringFunc(*s, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			val, ok := lookup(name)
			if !ok {
				v.addf(path, "environment variable %s is not set", name)
			}
			return val
		})
	}
	expand("listen", &c.Listen)
	expand("tracing.otlp_endpoint", &c.Tracing.Endpoint)
	for k, val := range c.Tracing.Headers {
		expand("tracing.headers."+k, &val)
		c.Tracing.Headers[k] = val
	}
	expand("store.snapshot_path", &c.Store.SnapshotPath)
	expand("ledger_path", &c.LedgerPath)
	expand("ledger_postgres", &c.LedgerPostgres)
	expand("keys_path", &c.KeysPath)
	for i := range c.Alerts.Webhooks {
		expand(fmt.Sprintf("alerts.webhooks.%d", i), &c.Alerts.Webhooks[i])
	}
	expand("audit_path", &c.AuditPath)
	expand("store.redis.password", &c.Store.Redis.Password)
	expand("store.redis.spool_path", &c.Store.Redis.SpoolPath)
	for i := range c.Store.Redis.Addrs {
		expand(fmt.Sprintf("store.redis.addrs.%d", i), &c.Store.Redis.Addrs[i])
	}
	for i := range c.Bypass.Secrets {
		expand(fmt.Sprintf("bypass.secrets.%d.secret", i), &c.Bypass.Secrets[i].Secret)
	}
	for i := range c.PaidRoutes {
		expand(fmt.Sprintf("paid_routes.%d.base_url", i), &c.PaidRoutes[i].BaseURL)
		expand(fmt.Sprintf("paid_routes.%d.api_key", i), &c.PaidRoutes[i].APIKey)
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		for _, f := range []struct {
			name string
			v    *string
		}{{"base_url", &u.BaseURL}, {"api_key", &u.APIKey}, {"access_key_id", &u.AccessKeyID}, {"secret_access_key", &u.SecretAccessKey},
			{"session_token", &u.SessionToken}, {"project", &u.Project}, {"credentials_file", &u.CredentialsFile}} {
			expand(fmt.Sprintf("upstreams.%d.%s", i, f.name), f.v)
		}
	}
	for i := range c.Orgs {
		for j := range c.Orgs[i].Teams {
			for k := range c.Orgs[i].Teams[j].Keys {
				expand(fmt.Sprintf("orgs.%d.teams.%d.keys.%d.hash", i, j, k), &c.Orgs[i].Teams[j].Keys[k].Hash)
			}
		}
	}
}

// validator collects problems, each located at its YAML line.
type validator struct {
	root *yaml.Node
	errs []string
}

func (v *validator) addf(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if line := v.line(path); line > 0 {
		v.errs = append(v.errs, fmt.Sprintf("line %d: %s: %s", line, path, msg))
		return
	}
	v.errs = append(v.errs, fmt.Sprintf("%s: %s", path, msg))
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(v.errs, "\n"))
}

// line finds the line of a dotted path ("orgs.0.teams.1.limits.2.kind") in
// the document, or of its nearest existing ancestor.
func (v *validator) line(path string) int {
	n := v.root
	if n == nil || len(n.Content) == 0 {
		return 0
	}
	n = n.Content[0]
	line := n.Line
	for _, part := range strings.Split(path, ".") {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// usd adds an error at path if m, an amount of dollars, is a bare number.
func (v *validator) usd(path string, m Money) {
	if msg := m.USD(); msg != "" {
		v.addf(path, "%s", msg)
	}
}

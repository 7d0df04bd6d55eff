#!/usr/bin/env node
// capture-proxy.mjs: a dependency-free recording HTTP proxy.
//
// It listens on one address, writes every request it receives as one JSON
// file in --out (keys: method, path, query, headers, body), then forwards
// the request unchanged to --upstream and streams the answer back as it
// arrives (SSE included: nothing is buffered on the way back).
//
//   node capture-proxy.mjs --listen 127.0.0.1:18301 \
//        --upstream http://127.0.0.1:18300 --out DIR \
//        [--rewrite-model FROM=TO ...] [--log FILE]
//
// What is recorded:
//   method   the HTTP method
//   path     the request path, without the query string
//   query    the query string without its "?" ("" when none); a "key"
//            parameter (Gemini's API key in the URL) is replaced by REDACTED
//   headers  every header as received (lower-cased names, in arrival order);
//            the values of authorization, x-api-key, x-goog-api-key,
//            api-key and proxy-authorization are replaced by "REDACTED".
//            A header sent more than once is kept as an array.
//   body     the body parsed as JSON when it parses (a gzip/deflate/br
//            content-encoding is undone first); otherwise the text, or for
//            bytes that are not UTF-8 {"base64": "..."}; null when empty.
//
// A request is written before it is forwarded, so it is kept whatever the
// upstream answers (404 for an endpoint the simulator lacks, 401, ...) or if
// the upstream cannot be reached (the proxy then answers 502). A WebSocket
// upgrade is recorded the same way and refused with 501.
//
// Files are named NNNN-METHOD-path-slug.json (NNNN counts from 0001 in the
// order requests arrived). A line per request also goes to DIR/index.jsonl
// with the file name, the upstream's status and any rewrite applied.
//
// Model rewriting (--rewrite-model): the simulated upstream (tollgate
// mock-upstream) accepts any model name, so by default nothing is
// rewritten. If an upstream refuses a client's model, give
// --rewrite-model FROM=TO (FROM may be "*" for every model): the FORWARDED
// copy then has its body's top-level "model" (and a Gemini path's
// /models/{model}:method) replaced; the recorded file always keeps what the
// client sent. Compressed bodies are never rewritten.

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

function parseArgs(argv) {
  const o = { listen: '127.0.0.1:18301', upstream: 'http://127.0.0.1:18300', out: null, rewrite: [], log: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--listen') o.listen = v();
    else if (a === '--upstream') o.upstream = v();
    else if (a === '--out') o.out = v();
    else if (a === '--log') o.log = v();
    else if (a === '--rewrite-model') {
      const [from, to] = v().split('=');
      if (!from || !to) throw new Error('--rewrite-model wants FROM=TO');
      o.rewrite.push({ from, to });
    } else if (a === '-h' || a === '--help') {
      process.stdout.write('usage: node capture-proxy.mjs --listen HOST:PORT --upstream URL --out DIR [--rewrite-model FROM=TO] [--log FILE]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!o.out) throw new Error('--out DIR is required');
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const upstream = new URL(opts.upstream);
fs.mkdirSync(opts.out, { recursive: true });
const indexFile = path.join(opts.out, 'index.jsonl');

const SECRET_HEADERS = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'proxy-authorization']);
const SECRET_QUERY = new Set(['key']);
// Hop-by-hop headers are not forwarded (RFC 9110 section 7.6.1).
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate']);

let seq = 0;

function log(msg) {
  const line = `[capture-proxy] ${new Date().toISOString()} ${msg}\n`;
  if (opts.log) fs.appendFileSync(opts.log, line);
  else process.stderr.write(line);
}

// headersOf keeps every header as received, in order, with secrets hidden.
function headersOf(req) {
  const out = {};
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    const value = SECRET_HEADERS.has(name) ? 'REDACTED' : raw[i + 1];
    if (name in out) out[name] = [].concat(out[name], value);
    else out[name] = value;
  }
  return out;
}

function splitURL(url) {
  const q = url.indexOf('?');
  const p = q < 0 ? url : url.slice(0, q);
  let query = q < 0 ? '' : url.slice(q + 1);
  if (query) {
    query = query
      .split('&')
      .map((kv) => {
        const name = decodeURIComponent(kv.split('=')[0]);
        return SECRET_QUERY.has(name) ? `${kv.split('=')[0]}=REDACTED` : kv;
      })
      .join('&');
  }
  return { path: p, query };
}

function decode(buf, encoding) {
  const enc = (encoding || '').toLowerCase().trim();
  try {
    if (enc === 'gzip' || enc === 'x-gzip') return { buf: zlib.gunzipSync(buf) };
    if (enc === 'deflate') return { buf: zlib.inflateSync(buf) };
    if (enc === 'br') return { buf: zlib.brotliDecompressSync(buf) };
    if (enc === 'zstd' && typeof zlib.zstdDecompressSync === 'function') return { buf: zlib.zstdDecompressSync(buf) };
  } catch (e) {
    return { buf, error: `could not undo content-encoding ${enc}: ${e.message}` };
  }
  if (enc && enc !== 'identity') return { buf, error: `content-encoding ${enc} not undone` };
  return { buf };
}

function bodyOf(buf, headers) {
  if (!buf.length) return null;
  const { buf: plain, error } = decode(buf, headers['content-encoding']);
  if (error) return { base64: buf.toString('base64'), note: error };
  const text = plain.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {}
  if (Buffer.from(text, 'utf8').equals(plain)) return text;
  return { base64: plain.toString('base64') };
}

function slug(p) {
  return (p.replace(/^\/+/, '').replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 80) || 'root');
}

function record(req, buf) {
  const n = ++seq;
  const { path: p, query } = splitURL(req.url);
  const headers = headersOf(req);
  const rec = { method: req.method, path: p, query, headers, body: bodyOf(buf, headers) };
  const file = `${String(n).padStart(4, '0')}-${req.method}-${slug(p)}.json`;
  fs.writeFileSync(path.join(opts.out, file), JSON.stringify(rec, null, 2) + '\n');
  return { n, file, rec };
}

function index(entry) {
  fs.appendFileSync(indexFile, JSON.stringify(entry) + '\n');
}

function rewriteFor(model) {
  for (const r of opts.rewrite) if (r.from === '*' || r.from === model) return r.to;
  return null;
}

// forwardCopy applies --rewrite-model to what is sent on, never to what was
// recorded.
function forwardCopy(req, buf, rec) {
  let url = req.url;
  let body = buf;
  const notes = [];
  if (!opts.rewrite.length) return { url, body, notes };
  const m = url.match(/\/models\/([^/:?]+):/);
  if (m) {
    const to = rewriteFor(decodeURIComponent(m[1]));
    if (to && to !== m[1]) {
      url = url.replace(`/models/${m[1]}:`, `/models/${encodeURIComponent(to)}:`);
      notes.push(`path model ${m[1]} -> ${to}`);
    }
  }
  const enc = (req.headers['content-encoding'] || '').toLowerCase();
  if ((!enc || enc === 'identity') && rec.body && typeof rec.body === 'object' && typeof rec.body.model === 'string') {
    const to = rewriteFor(rec.body.model);
    if (to && to !== rec.body.model) {
      body = Buffer.from(JSON.stringify({ ...rec.body, model: to }));
      notes.push(`body model ${rec.body.model} -> ${to}`);
    }
  }
  return { url, body, notes };
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('error', (e) => log(`request stream error: ${e.message}`));
  req.on('end', () => {
    const buf = Buffer.concat(chunks);
    let r;
    try {
      r = record(req, buf);
    } catch (e) {
      log(`could not record ${req.method} ${req.url}: ${e.message}`);
      r = { n: ++seq, file: null, rec: { body: null } };
    }
    const fwd = forwardCopy(req, buf, r.rec);
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
    headers.host = upstream.host;
    if (fwd.body.length || 'content-length' in req.headers) headers['content-length'] = String(fwd.body.length);
    const started = Date.now();
    const up = http.request(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port || 80,
        method: req.method,
        path: (upstream.pathname.replace(/\/$/, '') || '') + fwd.url,
        headers,
      },
      (ur) => {
        log(`${r.n} ${req.method} ${req.url} -> ${ur.statusCode}${fwd.notes.length ? ' (' + fwd.notes.join(', ') + ')' : ''}`);
        index({ seq: r.n, file: r.file, method: req.method, url: splitURL(req.url).path, status: ur.statusCode, rewritten: fwd.notes, ms: Date.now() - started });
        const out = {};
        for (const [k, v] of Object.entries(ur.headers)) if (!HOP.has(k)) out[k] = v;
        res.writeHead(ur.statusCode, ur.statusMessage, out);
        res.flushHeaders();
        // Write each chunk as it comes so server-sent events are not held.
        ur.on('data', (c) => res.write(c));
        ur.on('end', () => res.end());
        ur.on('error', (e) => {
          log(`upstream answer error: ${e.message}`);
          res.destroy(e);
        });
      },
    );
    up.on('error', (e) => {
      log(`${r.n} ${req.method} ${req.url} -> upstream error ${e.message}`);
      index({ seq: r.n, file: r.file, method: req.method, url: splitURL(req.url).path, status: 502, error: e.message });
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `capture-proxy: upstream unreachable: ${e.message}` } }));
      } else res.destroy(e);
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    up.end(fwd.body);
  });
});

// A WebSocket upgrade (e.g. a client that tries a realtime/responses socket)
// is recorded and refused; the client is expected to fall back to HTTP.
server.on('upgrade', (req, socket) => {
  const r = record(req, Buffer.alloc(0));
  log(`${r.n} ${req.method} ${req.url} upgrade to ${req.headers.upgrade} refused`);
  index({ seq: r.n, file: r.file, method: req.method, url: splitURL(req.url).path, status: 501, upgrade: req.headers.upgrade });
  socket.end('HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
});

server.on('clientError', (e, socket) => {
  log(`client error: ${e.message}`);
  socket.destroy();
});

const [host, port] = (() => {
  const i = opts.listen.lastIndexOf(':');
  return [opts.listen.slice(0, i) || '127.0.0.1', Number(opts.listen.slice(i + 1))];
})();
server.keepAliveTimeout = 60_000;
server.requestTimeout = 0;
server.listen(port, host, () => log(`listening on http://${host}:${port}, forwarding to ${opts.upstream}, writing ${opts.out}`));

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)) && setTimeout(() => process.exit(0), 500).unref());

#!/usr/bin/env node
// scripted-upstream.mjs: sits between capture-proxy.mjs and the simulated
// upstream for the few capture cases that need the model to call one
// client tool with sensible arguments (the simulator calls the first tool
// offered with arguments sampled from its schema, which a client may
// refuse: Claude Code's WebSearch rejects allowed_domains together with
// blocked_domains, so it never gets to the API call that carries the
// server-side web_search tool).
//
//   node scripted-upstream.mjs --listen 127.0.0.1:18302 \
//        --upstream http://127.0.0.1:18300 --tool WebSearch \
//        --args '{"query":"population of Paris"}'
//
// The first POST /v1/messages that offers a tool named --tool and does not
// end with a tool_result is answered with a tool_use of that tool with
// --args (streamed as Anthropic streams when the request asks for it).
// Every other request is passed to --upstream unchanged.

import http from 'node:http';

const o = { listen: '127.0.0.1:18302', upstream: 'http://127.0.0.1:18300', tool: null, args: '{}' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const k = argv[i].replace(/^--/, '');
  if (!(k in o)) throw new Error(`unknown argument ${argv[i]}`);
  o[k] = argv[++i];
}
if (!o.tool) throw new Error('--tool NAME is required');
JSON.parse(o.args);
const up = new URL(o.upstream);
let done = false;

function wants(req, body) {
  if (done || req.method !== 'POST' || !req.url.startsWith('/v1/messages') || req.url.startsWith('/v1/messages/')) return false;
  let b;
  try {
    b = JSON.parse(body);
  } catch {
    return false;
  }
  if (!(b.tools || []).some((t) => t.name === o.tool && !t.type)) return false;
  const last = (b.messages || []).at(-1);
  const c = Array.isArray(last?.content) ? last.content : [];
  if (c.some((x) => x.type === 'tool_result')) return false;
  return b;
}

function answer(res, b) {
  done = true;
  const id = 'toolu_scripted0000000001';
  const msg = { id: 'msg_scripted0001', type: 'message', role: 'assistant', model: b.model, stop_sequence: null };
  const usage = { input_tokens: 100, output_tokens: 20 };
  if (!b.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...msg, content: [{ type: 'tool_use', id, name: o.tool, input: JSON.parse(o.args) }], stop_reason: 'tool_use', usage }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', { message: { ...msg, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } });
  ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id, name: o.tool, input: {} } });
  ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: o.args } });
  ev('content_block_stop', { index: 0 });
  ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 20 } });
  ev('message_stop', {});
  res.end();
}

http
  .createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const b = wants(req, body.toString('utf8'));
      if (b) return answer(res, b);
      const headers = { ...req.headers, host: up.host };
      const p = http.request({ hostname: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      p.on('error', (e) => {
        res.writeHead(502);
        res.end(e.message);
      });
      p.end(body);
    });
  })
  .listen(Number(o.listen.split(':')[1]), o.listen.split(':')[0]);

#!/usr/bin/env node
// fixtures.mjs: turns what capture.sh recorded into fixtures, and analyses
// them for the allow-list report.
//
//   node fixtures.mjs --raw RAW --out FIXTURES [--prefix PREFIX]
//        [--analysis FILE.json] [--markdown FILE.md] [CLIENT ...]
//
// RAW/<client>/<NN>-<case>/NNNN-*.json are capture-proxy recordings (and
// run.json, the run's exit code). For each client given (all under RAW when
// none is), FIXTURES/<client>/ is written anew with one file per recorded
// request, named <NN>-<case>[-<endpoint>][-<k>].json, in the order they were
// sent; exact duplicates (same method, path, query, headers and body) are
// dropped. A file over 300 KB has long strings in its messages, system,
// instructions, input and contents cut to 400 characters, and a top-level
// "trimmed": true.
//
// The analysis (JSON, and Markdown tables with --markdown) lists, over every
// fixture: endpoints, top-level body fields with an example and the clients
// sending them, nested field paths (free-form objects such as JSON schemas
// and tool arguments are not descended), headers and their values
// (anthropic-beta split on commas), and tool types.

import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = { raw: null, out: null, prefix: null, analysis: null, markdown: null, clients: [] };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--raw') opt.raw = args[++i];
  else if (a === '--out') opt.out = args[++i];
  else if (a === '--prefix') opt.prefix = args[++i];
  else if (a === '--analysis') opt.analysis = args[++i];
  else if (a === '--markdown') opt.markdown = args[++i];
  else opt.clients.push(a);
}
if (!opt.raw || !opt.out) {
  console.error('usage: node fixtures.mjs --raw RAW --out FIXTURES [--prefix PREFIX] [--analysis FILE] [--markdown FILE] [CLIENT...]');
  process.exit(2);
}

const LIMIT = 300 * 1024;
const TRIM_TO = 400;
const isDir = (p) => fs.existsSync(p) && fs.statSync(p).isDirectory();
const readJSON = (p) => JSON.parse(fs.readFileSync(p, 'utf8'));

// endpointOf names a request's endpoint: the method and the path with the
// Gemini model (and any other variable segment) generalised.
function endpointOf(rec) {
  let p = rec.path
    .replace(/\/models\/[^/:]+:/, '/models/{model}:')
    .replace(/\/publishers\/(\w+)\/models\/[^/:]+/, '/publishers/$1/models/{model}');
  if (rec.method === 'GET' && /^\/v1\/models\/.+/.test(p)) p = '/v1/models/{model}';
  return `${rec.method} ${p}`;
}

function shortEndpoint(rec) {
  const p = rec.path;
  const m = p.match(/:(\w+)$/);
  if (m) return { generateContent: 'generate', streamGenerateContent: 'stream-generate' }[m[1]] || m[1].replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
  return p.replace(/^\/v1(beta)?\//, '').replace(/\//g, '-').replace(/_/g, '-') || 'root';
}

// trim cuts long strings inside the conversation-carrying fields.
function trim(rec) {
  const keys = ['messages', 'system', 'instructions', 'input', 'contents', 'systemInstruction', 'prompt'];
  let cut = false;
  const walk = (v) => {
    if (typeof v === 'string') {
      if (v.length > TRIM_TO) {
        cut = true;
        return v.slice(0, TRIM_TO) + `…[trimmed ${v.length - TRIM_TO} chars]`;
      }
      return v;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const body = { ...rec.body };
  for (const k of keys) if (k in body) body[k] = walk(body[k]);
  return cut ? { trimmed: true, ...rec, body } : rec;
}

// Fixtures are (re)written for the clients named (every client recorded
// under RAW when none is); the analysis covers every client that has
// fixtures: from its recordings when RAW has them (so upstream statuses are
// known), else from the fixture files themselves.
const dirsIn = (d) => (isDir(d) ? fs.readdirSync(d).filter((c) => isDir(path.join(d, c))).sort() : []);
const requested = opt.clients.length ? opt.clients : dirsIn(opt.raw);
const clients = [...new Set([...requested, ...dirsIn(opt.out)])].sort();
const fixtures = []; // {client, case, file, rec, status}
const runs = {}; // client -> [{case, exit, requests, statuses}]

for (const client of clients) {
  const dir = path.join(opt.raw, client);
  const outDir = path.join(opt.out, client);
  const write = requested.includes(client) && isDir(dir);
  if (!isDir(dir)) {
    if (requested.includes(client)) console.error(`no recordings for ${client}`);
    for (const f of isDir(outDir) ? fs.readdirSync(outDir).filter((f) => f.endsWith('.json')).sort() : []) {
      const rec = readJSON(path.join(outDir, f));
      fixtures.push({ client, case: f.replace(/^\d+-|\.json$/g, ''), file: `${client}/${f}`, rec, status: undefined, bytes: fs.statSync(path.join(outDir, f)).size, trimmed: !!rec.trimmed });
    }
    continue;
  }
  if (write) {
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.mkdirSync(outDir, { recursive: true });
  }
  runs[client] = [];
  const seen = new Set();
  let n = 0;
  for (const caseDir of fs.readdirSync(dir).filter((d) => isDir(path.join(dir, d))).sort()) {
    const caseName = caseDir.replace(/^\d+-/, '');
    const full = path.join(dir, caseDir);
    const run = fs.existsSync(path.join(full, 'run.json')) ? readJSON(path.join(full, 'run.json')) : {};
    const index = fs.existsSync(path.join(full, 'index.jsonl'))
      ? fs.readFileSync(path.join(full, 'index.jsonl'), 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
      : [];
    const files = fs.readdirSync(full).filter((f) => /^\d{4}-.*\.json$/.test(f)).sort();
    const recs = files.map((f) => ({ f, rec: readJSON(path.join(full, f)) }));
    const ends = recs.map(({ rec }) => shortEndpoint(rec));
    const counts = {};
    const caseFiles = [];
    runs[client].push({
      case: caseName,
      exit: run.exit,
      requests: files.length,
      statuses: index.map((e) => `${e.method} ${e.url} ${e.status}`),
      command: run.command,
      fixtures: caseFiles,
    });
    recs.forEach(({ f, rec }, i) => {
      const key = JSON.stringify(rec);
      if (seen.has(key)) return;
      seen.add(key);
      const e = ends[i];
      counts[e] = (counts[e] || 0) + 1;
      // The endpoint is named only when a case used more than one.
      let name = caseName + (new Set(ends).size > 1 ? `-${e}` : '');
      if (ends.filter((x) => x === e).length > 1) name += `-${counts[e]}`;
      n++;
      const file = `${String(n).padStart(2, '0')}-${name}.json`;
      caseFiles.push(file);
      let out = rec;
      let text = JSON.stringify(out, null, 2) + '\n';
      if (Buffer.byteLength(text) > LIMIT) {
        out = trim(rec);
        text = JSON.stringify(out, null, 2) + '\n';
      }
      if (write) fs.writeFileSync(path.join(outDir, file), text);
      const status = index.find((x) => x.file === f)?.status;
      fixtures.push({ client, case: caseName, file: `${client}/${file}`, rec, status, bytes: Buffer.byteLength(text), trimmed: !!out.trimmed });
    });
  }
  if (write) console.error(`${client}: ${n} fixture(s) in ${outDir}`);
}

// ------------------------------------------------------------ versions

const versions = {};
if (opt.prefix && isDir(opt.prefix)) {
  for (const d of fs.readdirSync(opt.prefix)) {
    const f = path.join(opt.prefix, d, 'versions.json');
    if (!fs.existsSync(f)) continue;
    try {
      const deps = readJSON(f).dependencies || {};
      versions[d] = Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, v.version]));
    } catch {}
  }
}

// ------------------------------------------------------------ analysis

// Positions whose contents are the caller's own (JSON schemas, tool
// arguments and results): listed, not descended.
const OPAQUE = [
  // a tool's schema wherever tools are declared (Codex also declares them
  // inside input[] items of type additional_tools, and in namespaces)
  /(^|\.)tools\[\](\.tools\[\])*\.(input_schema|parameters)$/,
  /(^|\.)tools\[\]\.function\.parameters$/,
  /^tools\[\]\.functionDeclarations\[\]\.(parameters|parametersJsonSchema|response|responseJsonSchema)$/,
  /^response_format\.json_schema\.schema$/,
  /^text\.format\.schema$/,
  /^output_config\.format\.schema$/,
  /^output_format\.schema$/,
  /^generationConfig\.(responseJsonSchema|responseSchema|_responseJsonSchema)$/,
  /\.content\[\]\.input$/,
  /^messages\[\]\.tool_calls\[\]\.function\.arguments$/,
  /\.functionCall\.args$/,
  /\.functionResponse\.response$/,
  /^metadata$/,
];
const opaque = (p) => OPAQUE.some((r) => r.test(p));
const DISCRIMINATORS = new Set(['type', 'role', 'mode', 'effort', 'summary', 'verbosity', 'detail', 'ttl', 'tool_choice', 'service_tier', 'include', 'responseMimeType', 'finish_reason', 'status', 'truncation', 'media_type', 'mimeType', 'context', 'keep', 'thinkingLevel', 'reasoning_effort', 'modalities', 'allowedFunctionNames', 'functionCallingConfig', 'encoding_format', 'syntax', 'search_context_size', 'external_web_access', 'stream', 'store', 'parallel_tool_calls', 'strict', 'includeThoughts', 'disable_parallel_tool_use', 'propertyOrdering', 'responseModalities']);

const short = (v, n = 80) => {
  let s = typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v);
  if (s === undefined) s = String(v);
  return s.length > n ? s.slice(0, n) + '…' : s;
};

const endpoints = {}; // ep -> {clients:Set, queries:Set, top:{field:{ex, clients:Set}}, paths:{path:{values:Set, ex, clients:Set, opaque}}}
const headers = {}; // name -> {values: Map(value -> Set clients), clients:Set}
const betas = {}; // beta -> Set clients
const toolTypes = {}; // `${ep} ${kind}` -> {clients:Set, names:Set}
const toolNames = {}; // client -> Set of names
const statusOf = {}; // ep -> Set of statuses

function addPath(ep, p, v, client) {
  const e = (ep.paths[p] ||= { values: new Map(), ex: undefined, clients: new Set(), opaque: opaque(p), kinds: new Set() });
  e.clients.add(client);
  e.kinds.add(Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);
  const key = p.split('.').pop().replace(/\[\]$/, '');
  if (v !== null && typeof v !== 'object') {
    if (e.ex === undefined) e.ex = v;
    if (DISCRIMINATORS.has(key) || typeof v === 'boolean') {
      const s = short(v, 60);
      if (!e.values.has(s)) e.values.set(s, new Set());
      e.values.get(s).add(client);
    }
  } else if (e.ex === undefined && (e.opaque || (Array.isArray(v) && v.every((x) => typeof x !== 'object')))) e.ex = v;
  if (Array.isArray(v) && DISCRIMINATORS.has(key) && v.every((x) => typeof x === 'string')) {
    for (const x of v) {
      const s = short(x, 60);
      if (!e.values.has(s)) e.values.set(s, new Set());
      e.values.get(s).add(client);
    }
  }
}

function walk(ep, prefix, v, client) {
  if (Array.isArray(v)) {
    for (const x of v) {
      if (x && typeof x === 'object' && !Array.isArray(x)) walkObj(ep, `${prefix}[]`, x, client);
      else if (Array.isArray(x)) walk(ep, `${prefix}[]`, x, client);
    }
  } else if (v && typeof v === 'object') walkObj(ep, prefix, v, client);
}

function walkObj(ep, prefix, o, client) {
  for (const [k, v] of Object.entries(o)) {
    const p = prefix ? `${prefix}.${k}` : k;
    addPath(ep, p, v, client);
    if (opaque(p)) continue;
    walk(ep, p, v, client);
  }
}

function toolKinds(body, ep) {
  const out = [];
  const tools = Array.isArray(body?.tools) ? body.tools : [];
  for (const t of tools) {
    if (!t || typeof t !== 'object') continue;
    if (ep.includes(':generateContent') || ep.includes(':streamGenerateContent') || ep.includes('/models/{model}:')) {
      for (const k of Object.keys(t)) out.push({ kind: `gemini tools[].${k}`, names: (t[k] || []).map?.((d) => d.name).filter(Boolean) || [] });
    } else if (ep.endsWith('/v1/messages') || ep.includes('count_tokens')) {
      out.push({ kind: `anthropic type=${t.type ?? '(none: custom tool)'}`, names: [t.name] });
    } else if (ep.endsWith('/chat/completions')) {
      out.push({ kind: `chat type=${t.type}`, names: [t.function?.name ?? t.name] });
    } else out.push(responsesTool(t, 'tools[]'));
  }
  // Codex (with some models) declares tools inside an input item instead.
  for (const item of Array.isArray(body?.input) ? body.input : []) {
    if (item?.type !== 'additional_tools') continue;
    for (const t of item.tools || []) out.push(responsesTool(t, 'input[type=additional_tools].tools[]'));
  }
  return out;
}

function responsesTool(t, where) {
  if (t.type !== 'namespace') return { kind: `responses ${where} type=${t.type}`, names: [t.name].filter(Boolean) };
  const inner = [...new Set((t.tools || []).map((x) => x.type))].sort().join('+');
  return { kind: `responses ${where} type=namespace (holding type ${inner})`, names: [`${t.name}: ${(t.tools || []).map((x) => `${x.type}:${x.name}`).join(', ')}`] };
}

// collapse shortens runs of numbered names (echo_00 … echo_29).
function collapse(names) {
  const groups = new Map();
  const out = [];
  for (const n of names) {
    const m = n.match(/^(.*?)(\d+)$/);
    if (m) (groups.get(m[1]) || groups.set(m[1], []).get(m[1])).push(n);
    else out.push(n);
  }
  for (const [p, g] of groups) {
    if (g.length > 3) out.push(`${g[0]} … ${g.at(-1)} (${g.length} tools)`);
    else out.push(...g);
  }
  return out.sort();
}

const STANDARD = new Set(['host', 'connection', 'content-length', 'content-type', 'accept', 'accept-encoding', 'accept-language', 'user-agent', 'authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'transfer-encoding', 'content-encoding', 'sec-fetch-mode', 'expect']);

for (const fx of fixtures) {
  const { rec, client } = fx;
  const ep = endpointOf(rec);
  const E = (endpoints[ep] ||= { clients: new Set(), queries: new Map(), top: {}, paths: {}, fixtures: [] });
  E.clients.add(client);
  E.fixtures.push(fx.file);
  (statusOf[ep] ||= new Set()).add(fx.status);
  const q = rec.query || '(none)';
  if (!E.queries.has(q)) E.queries.set(q, new Set());
  E.queries.get(q).add(client);
  if (rec.body && typeof rec.body === 'object' && !Array.isArray(rec.body)) {
    for (const [k, v] of Object.entries(rec.body)) {
      const t = (E.top[k] ||= { ex: undefined, clients: new Set(), values: new Map() });
      t.clients.add(client);
      if (t.ex === undefined) t.ex = v;
      if (v === null || typeof v !== 'object' || (Array.isArray(v) && v.every((x) => typeof x !== 'object'))) {
        const s = short(v, 60);
        if (!t.values.has(s)) t.values.set(s, new Set());
        t.values.get(s).add(client);
      }
    }
    walkObj(E, '', rec.body, client);
  }
  for (const [name, value] of Object.entries(rec.headers || {})) {
    const h = (headers[name] ||= { values: new Map(), clients: new Set() });
    h.clients.add(client);
    for (const v of [].concat(value)) {
      if (!h.values.has(v)) h.values.set(v, new Set());
      h.values.get(v).add(client);
      if (name === 'anthropic-beta') for (const b of v.split(',').map((s) => s.trim()).filter(Boolean)) (betas[b] ||= new Set()).add(client);
    }
  }
  for (const t of toolKinds(rec.body, ep)) {
    const k = `${ep} | ${t.kind}`;
    const T = (toolTypes[k] ||= { clients: new Set(), names: new Set() });
    T.clients.add(client);
    for (const nm of t.names) {
      T.names.add(nm);
      (toolNames[client] ||= new Set()).add(nm);
    }
  }
}

const setList = (s) => [...s].sort().join(', ');
const analysis = {
  clients,
  versions,
  runs,
  fixtures: fixtures.map(({ file, status, bytes, trimmed }) => ({ file, status, bytes, trimmed })),
  endpoints: Object.fromEntries(
    Object.entries(endpoints).map(([ep, E]) => [
      ep,
      {
        clients: [...E.clients].sort(),
        statuses: [...statusOf[ep]],
        queries: Object.fromEntries([...E.queries].map(([q, s]) => [q, [...s].sort()])),
        top: Object.fromEntries(Object.entries(E.top).map(([k, t]) => [k, { example: t.ex, clients: [...t.clients].sort(), values: Object.fromEntries([...t.values].map(([v, s]) => [v, [...s].sort()])) }])),
        paths: Object.fromEntries(
          Object.entries(E.paths)
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([p, e]) => [p, { kinds: [...e.kinds], example: e.ex, opaque: e.opaque, clients: [...e.clients].sort(), values: Object.fromEntries([...e.values].map(([v, s]) => [v, [...s].sort()])) }]),
        ),
      },
    ]),
  ),
  headers: Object.fromEntries(Object.entries(headers).sort(([a], [b]) => a.localeCompare(b)).map(([n, h]) => [n, { standard: STANDARD.has(n), clients: [...h.clients].sort(), values: Object.fromEntries([...h.values].map(([v, s]) => [v, [...s].sort()])) }])),
  anthropicBetas: Object.fromEntries(Object.entries(betas).sort(([a], [b]) => a.localeCompare(b)).map(([b, s]) => [b, [...s].sort()])),
  toolTypes: Object.fromEntries(Object.entries(toolTypes).sort(([a], [b]) => a.localeCompare(b)).map(([k, t]) => [k, { clients: [...t.clients].sort(), names: [...t.names].sort() }])),
  toolNames: Object.fromEntries(Object.entries(toolNames).map(([c, s]) => [c, [...s].sort()])),
};
if (opt.analysis) fs.writeFileSync(opt.analysis, JSON.stringify(analysis, null, 2) + '\n');

// ------------------------------------------------------------ markdown

if (opt.markdown) {
  const md = [];
  const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const code = (s) => '`' + String(s).replace(/`/g, "'").replace(/\|/g, '\\|').replace(/\n/g, ' ') + '`';
  md.push('## Endpoints\n');
  md.push('| endpoint | query strings seen | clients | upstream status |');
  md.push('| --- | --- | --- | --- |');
  for (const [ep, E] of Object.entries(analysis.endpoints).sort()) {
    md.push(`| ${code(ep)} | ${Object.entries(E.queries).map(([q, c]) => `${code(q)} (${c.join(', ')})`).join('<br>')} | ${E.clients.join(', ')} | ${E.statuses.join(', ')} |`);
  }
  md.push('');
  for (const [ep, E] of Object.entries(analysis.endpoints).sort()) {
    md.push(`### ${ep}\n`);
    md.push(`Clients: ${E.clients.join(', ')}.\n`);
    md.push('Top-level body fields:\n');
    md.push('| field | example | values seen (scalars) | clients |');
    md.push('| --- | --- | --- | --- |');
    for (const [k, t] of Object.entries(E.top).sort(([a], [b]) => a.localeCompare(b))) {
      const vals = Object.keys(t.values).length <= 8 ? Object.entries(t.values).map(([v, c]) => `${code(v)}${c.length < E.clients.length ? ` (${c.join(', ')})` : ''}`).join(', ') : `${Object.keys(t.values).length} distinct`;
      md.push(`| ${code(k)} | ${code(short(t.example, 100))} | ${vals} | ${t.clients.join(', ')} |`);
    }
    md.push('');
    const nested = Object.entries(E.paths).filter(([p]) => p.includes('.') || p.includes('[]'));
    if (nested.length) {
      md.push('Nested field paths (⊘ = free-form: a JSON schema, tool arguments or results; not descended):\n');
      md.push('| path | kind | values / example | clients |');
      md.push('| --- | --- | --- | --- |');
      for (const [p, e] of nested) {
        let vals = '';
        if (Object.keys(e.values).length) vals = Object.entries(e.values).slice(0, 20).map(([v, c]) => `${code(v)}${c.length < e.clients.length ? ` (${c.join(', ')})` : ''}`).join(', ') + (Object.keys(e.values).length > 20 ? ', …' : '');
        else if (e.example !== undefined) vals = 'e.g. ' + code(short(e.example, 70));
        md.push(`| ${code(p)}${e.opaque ? ' ⊘' : ''} | ${e.kinds.join('/')} | ${vals} | ${e.clients.join(', ')} |`);
      }
      md.push('');
    }
  }
  md.push('## Headers\n');
  md.push('| header | standard? | values (secrets redacted; long lists summarised) | clients |');
  md.push('| --- | --- | --- | --- |');
  for (const [n, h] of Object.entries(analysis.headers)) {
    const vals = Object.entries(h.values);
    const volatile = /session|request-id|window-id|turn-metadata|thread-id|content-length|timeout|x-client-request-id|idempotency|traceparent|x-claude-code-session-id/.test(n);
    let shown;
    if (n === 'anthropic-beta') shown = `${vals.length} distinct combinations (split below)`;
    else if (volatile && vals.length > 3) shown = `${vals.length} distinct, e.g. ${code(short(vals[0][0], 120))}`;
    else shown = vals.slice(0, 12).map(([v, c]) => `${code(short(v, 120))} (${c.join(', ')})`).join('<br>') + (vals.length > 12 ? `<br>… ${vals.length - 12} more` : '');
    md.push(`| ${code(n)} | ${h.standard ? 'yes' : '**no**'} | ${shown} | ${h.clients.join(', ')} |`);
  }
  md.push('\n## anthropic-beta values (split on commas)\n');
  md.push('| beta | clients |');
  md.push('| --- | --- |');
  for (const [b, c] of Object.entries(analysis.anthropicBetas)) md.push(`| ${code(b)} | ${c.join(', ')} |`);
  md.push('\n## Tool types\n');
  md.push('| endpoint \\| kind | clients | tool names |');
  md.push('| --- | --- | --- |');
  for (const [k, t] of Object.entries(analysis.toolTypes)) md.push(`| ${code(k)} | ${t.clients.join(', ')} | ${esc(collapse(t.names).join(', '))} |`);
  md.push('');
  fs.writeFileSync(opt.markdown, md.join('\n') + '\n');
}

// ------------------------------------------------------------ README

// The fixtures' README says where they came from: the client versions, and
// per client each fixture's endpoint and the upstream's answer.
const PKGS = {
  'claude-code': ['claude-code', ['@anthropic-ai/claude-code']],
  codex: ['codex', ['@openai/codex']],
  'gemini-cli': ['gemini-cli', ['@google/gemini-cli']],
  opencode: ['opencode', ['opencode-ai']],
  'ai-sdk': ['sdk', ['ai', '@ai-sdk/openai', '@ai-sdk/anthropic', '@ai-sdk/google']],
  langchain: ['sdk', ['@langchain/openai', '@langchain/anthropic', '@langchain/core']],
  'openai-node': ['sdk', ['openai']],
  'anthropic-node': ['sdk', ['@anthropic-ai/sdk']],
  'google-genai': ['sdk', ['@google/genai']],
};
analysis.clientVersions = Object.fromEntries(
  clients.map((c) => {
    const [prefix, pkgs] = PKGS[c] || [c, []];
    return [c, Object.fromEntries(pkgs.map((p) => [p, versions[prefix]?.[p] ?? null]))];
  }),
);
if (opt.analysis) fs.writeFileSync(opt.analysis, JSON.stringify(analysis, null, 2) + '\n');
{
  const md = [];
  md.push('# Client request fixtures', '');
  md.push('Requests that real LLM clients sent, recorded by `scripts/agents/capture.sh` (client, mock upstream and');
  md.push('`scripts/agents/capture-proxy.mjs` all on 127.0.0.1). One file per request: `method`, `path`, `query`,');
  md.push('`headers` (API keys replaced by `REDACTED`) and `body` as the client sent it. The answers came from');
  md.push("`tollgate mock-upstream`, so tool calls carry the simulator's sampled arguments, and no assistant turn");
  md.push('holds thinking/reasoning blocks (the simulator never produces them). Do not edit these files by hand: re-run');
  md.push('`scripts/agents/capture.sh [client ...]`.', '');
  md.push('| client | packages |', '| --- | --- |');
  for (const [c, v] of Object.entries(analysis.clientVersions)) md.push(`| ${c} | ${Object.entries(v).map(([p, x]) => `${p}@${x ?? '?'}`).join(', ')} |`);
  md.push('');
  for (const c of clients) {
    md.push(`## ${c}`, '');
    md.push('| fixture | endpoint | upstream status |', '| --- | --- | --- |');
    for (const fx of fixtures.filter((f) => f.client === c)) {
      md.push(`| ${path.basename(fx.file)} | \`${endpointOf(fx.rec)}${fx.rec.query ? '?' + fx.rec.query : ''}\` | ${fx.status ?? ''} |`);
    }
    const failed = (runs[c] || []).filter((r) => r.exit !== 0);
    if (failed.length) md.push('', `Runs that exited non-zero: ${failed.map((r) => `${r.case} (exit ${r.exit}, ${r.requests} request(s))`).join('; ')}.`);
    md.push('');
  }
  fs.writeFileSync(path.join(opt.out, 'README.md'), md.join('\n'));
}

#!/usr/bin/env node
// mcp-server.mjs: a dependency-free MCP server (stdio, newline-delimited
// JSON-RPC) for the capture cases that need a client to declare MCP tools.
// It offers N tools (default 30: echo_00 ... echo_29, enough for Claude
// Code to consider deferring them behind its tool search), each echoing
// its arguments back.
//
//   node mcp-server.mjs [N]
import readline from 'node:readline';

const n = Number(process.argv[2] || 30);
const tools = Array.from({ length: n }, (_, i) => ({
  name: `echo_${String(i).padStart(2, '0')}`,
  description: `Echo the given text back (tool ${i} of ${n}).`,
  inputSchema: { type: 'object', properties: { text: { type: 'string', description: 'Text to echo' } }, required: ['text'] },
}));
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined || m.id === null) return; // a notification
  const ok = (result) => send({ jsonrpc: '2.0', id: m.id, result });
  switch (m.method) {
    case 'initialize':
      return ok({ protocolVersion: m.params?.protocolVersion || '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'capture', version: '1.0.0' } });
    case 'tools/list':
      return ok({ tools });
    case 'tools/call':
      return ok({ content: [{ type: 'text', text: JSON.stringify(m.params?.arguments ?? {}) }] });
    case 'ping':
      return ok({});
    default:
      return send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `method ${m.method} not supported` } });
  }
});

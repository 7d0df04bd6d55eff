// The official @anthropic-ai/sdk: messages plain, streamed, with a tool
// (and the follow-up with its tool_result), with structured output
// (output_config.format json_schema, as messages.parse sends it), with
// extended thinking, with prompt caching, and token counting.
import Anthropic from '@anthropic-ai/sdk';
import { jsonSchemaOutputFormat } from '@anthropic-ai/sdk/helpers/json-schema';
import { BASE, KEY, ANTHROPIC_MODEL as MODEL, PROMPT, TOOL_PROMPT, JSON_PROMPT, weatherParams, citySchema, weather, main, drain } from './common.mjs';

const client = new Anthropic({ baseURL: BASE, apiKey: KEY, maxRetries: 0 });
const tool = { name: 'get_weather', description: 'Get the weather for a city', input_schema: weatherParams };

await main({
  'messages-plain': async () => {
    const r = await client.messages.create({ model: MODEL, max_tokens: 100, system: 'You are terse.', messages: [{ role: 'user', content: PROMPT }], temperature: 0.2 });
    return r.content;
  },
  'messages-stream': async () => {
    const s = client.messages.stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] });
    const m = await s.finalMessage();
    return m.content;
  },
  'messages-stream-raw': async () => {
    const s = await client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }], stream: true });
    return drain(s, (e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? e.delta.text : undefined));
  },
  'messages-tool': async () => {
    const messages = [{ role: 'user', content: TOOL_PROMPT }];
    const r = await client.messages.create({ model: MODEL, max_tokens: 200, messages, tools: [tool], tool_choice: { type: 'auto' } });
    const uses = r.content.filter((b) => b.type === 'tool_use');
    if (!uses.length) return r.content;
    messages.push({ role: 'assistant', content: r.content });
    messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: JSON.stringify(weather(u.input)) })) });
    const r2 = await client.messages.create({ model: MODEL, max_tokens: 200, messages, tools: [tool] });
    return r2.content;
  },
  'messages-tool-forced': async () => {
    const r = await client.messages.create({ model: MODEL, max_tokens: 200, messages: [{ role: 'user', content: TOOL_PROMPT }], tools: [tool], tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
    return r.content;
  },
  'messages-json-schema': async () => {
    const r = await client.messages.parse({ model: MODEL, max_tokens: 200, messages: [{ role: 'user', content: JSON_PROMPT }], output_config: { format: jsonSchemaOutputFormat(citySchema) } });
    return r.parsed_output;
  },
  'messages-thinking': async () => {
    const r = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: PROMPT }] });
    return r.content;
  },
  'messages-cache-control': async () => {
    const r = await client.messages.create({
      model: MODEL,
      max_tokens: 100,
      system: [{ type: 'text', text: 'You are a helpful assistant. '.repeat(20), cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT, cache_control: { type: 'ephemeral', ttl: '5m' } }] }],
      metadata: { user_id: 'user-1234' },
    });
    return r.content;
  },
  'count-tokens': async () => {
    const r = await client.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], tools: [tool] });
    return r;
  },
  'models-list': async () => {
    const page = await client.models.list();
    return page.data.map((m) => m.id);
  },
});

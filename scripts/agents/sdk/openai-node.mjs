// The official openai Node SDK: chat completions and responses, each plain,
// streamed, with a function tool (and the follow-up carrying the tool's
// result) and with a JSON-schema structured output; plus embeddings and
// the model list.
import OpenAI from 'openai';
import { BASE, KEY, OPENAI_MODEL as MODEL, PROMPT, TOOL_PROMPT, JSON_PROMPT, weatherParams, citySchema, weather, main, drain } from './common.mjs';

const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: KEY, maxRetries: 0 });

const chatTool = { type: 'function', function: { name: 'get_weather', description: 'Get the weather for a city', parameters: weatherParams, strict: true } };
const respTool = { type: 'function', name: 'get_weather', description: 'Get the weather for a city', parameters: weatherParams, strict: true };

await main({
  'chat-plain': async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: PROMPT },
      ],
      max_completion_tokens: 50,
      temperature: 0.2,
    });
    return r.choices[0].message.content;
  },
  'chat-stream': async () => {
    const s = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      stream: true,
      stream_options: { include_usage: true },
    });
    return drain(s, (c) => c.choices[0]?.delta?.content);
  },
  'chat-tool': async () => {
    const messages = [{ role: 'user', content: TOOL_PROMPT }];
    const r = await client.chat.completions.create({ model: MODEL, messages, tools: [chatTool], tool_choice: 'auto', parallel_tool_calls: false });
    const msg = r.choices[0].message;
    if (!msg.tool_calls?.length) return msg.content;
    messages.push(msg);
    for (const call of msg.tool_calls) {
      messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(weather(JSON.parse(call.function.arguments))) });
    }
    const r2 = await client.chat.completions.create({ model: MODEL, messages, tools: [chatTool] });
    return r2.choices[0].message.content;
  },
  'chat-json-schema': async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: JSON_PROMPT }],
      response_format: { type: 'json_schema', json_schema: { name: 'city', schema: citySchema, strict: true } },
    });
    return r.choices[0].message.content;
  },
  'chat-parse-zod': async () => {
    // client.chat.completions.parse with zodResponseFormat, the SDK's own
    // structured-output helper.
    const { zodResponseFormat } = await import('openai/helpers/zod');
    const { z } = await import('zod');
    const r = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: 'user', content: JSON_PROMPT }],
      response_format: zodResponseFormat(z.object({ city: z.string(), population: z.number().int() }), 'city'),
    });
    return r.choices[0].message.parsed;
  },
  'responses-plain': async () => {
    const r = await client.responses.create({ model: MODEL, instructions: 'You are terse.', input: PROMPT, max_output_tokens: 50 });
    return r.output_text;
  },
  'responses-stream': async () => {
    const s = await client.responses.create({ model: MODEL, input: [{ role: 'user', content: PROMPT }], stream: true });
    return drain(s, (e) => (e.type === 'response.output_text.delta' ? e.delta : undefined));
  },
  'responses-tool': async () => {
    const input = [{ role: 'user', content: TOOL_PROMPT }];
    const r = await client.responses.create({ model: MODEL, input, tools: [respTool], tool_choice: 'auto' });
    const calls = r.output.filter((o) => o.type === 'function_call');
    if (!calls.length) return r.output_text;
    input.push(...r.output);
    for (const call of calls) {
      input.push({ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify(weather(JSON.parse(call.arguments))) });
    }
    const r2 = await client.responses.create({ model: MODEL, input, tools: [respTool] });
    return r2.output_text;
  },
  'responses-json-schema': async () => {
    const r = await client.responses.create({
      model: MODEL,
      input: JSON_PROMPT,
      text: { format: { type: 'json_schema', name: 'city', schema: citySchema, strict: true } },
    });
    return r.output_text;
  },
  embeddings: async () => {
    const r = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['hello', 'world'] });
    return r.data.length;
  },
  models: async () => {
    const page = await client.models.list();
    return page.data.map((m) => m.id);
  },
});

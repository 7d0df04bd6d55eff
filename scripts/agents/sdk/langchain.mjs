// LangChain JS: ChatOpenAI (chat completions, and the responses API with
// useResponsesApi) and ChatAnthropic; each invoked plain, streamed, with a
// bound tool (and the follow-up with the ToolMessage) and with
// withStructuredOutput (a JSON schema).
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { BASE, KEY, OPENAI_MODEL, ANTHROPIC_MODEL, PROMPT, TOOL_PROMPT, JSON_PROMPT, weather, main } from './common.mjs';

const models = {
  'openai-chat': () => new ChatOpenAI({ model: OPENAI_MODEL, apiKey: KEY, configuration: { baseURL: `${BASE}/v1` }, maxRetries: 0, temperature: 0.2 }),
  'openai-responses': () => new ChatOpenAI({ model: OPENAI_MODEL, apiKey: KEY, configuration: { baseURL: `${BASE}/v1` }, maxRetries: 0, useResponsesApi: true }),
  anthropic: () => new ChatAnthropic({ model: ANTHROPIC_MODEL, apiKey: KEY, anthropicApiUrl: BASE, maxRetries: 0, maxTokens: 200 }),
};

const getWeather = tool(async (args) => JSON.stringify(weather(args)), {
  name: 'get_weather',
  description: 'Get the weather for a city',
  schema: z.object({ city: z.string().describe('City name'), unit: z.enum(['celsius', 'fahrenheit']) }),
});

const cases = {};
for (const [name, make] of Object.entries(models)) {
  cases[`${name}-plain`] = async () => {
    const r = await make().invoke([new SystemMessage('You are terse.'), new HumanMessage(PROMPT)]);
    return r.content;
  };
  cases[`${name}-stream`] = async () => {
    let text = '';
    for await (const c of await make().stream(PROMPT)) text += typeof c.content === 'string' ? c.content : '';
    return text;
  };
  cases[`${name}-tool`] = async () => {
    const llm = make().bindTools([getWeather]);
    const messages = [new HumanMessage(TOOL_PROMPT)];
    const ai = await llm.invoke(messages);
    if (!ai.tool_calls?.length) return ai.content;
    messages.push(ai);
    for (const call of ai.tool_calls) messages.push(new ToolMessage({ tool_call_id: call.id, content: await getWeather.invoke(call.args) }));
    const r = await llm.invoke(messages);
    return r.content;
  };
  cases[`${name}-structured`] = async () => {
    const llm = make().withStructuredOutput(z.object({ city: z.string(), population: z.number().int() }), { name: 'city' });
    return llm.invoke(JSON_PROMPT);
  };
}

await main(cases);

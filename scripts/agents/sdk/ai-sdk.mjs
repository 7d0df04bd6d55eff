// The Vercel AI SDK (ai, with @ai-sdk/openai, @ai-sdk/anthropic and
// @ai-sdk/google): for each provider API (OpenAI responses, which
// @ai-sdk/openai uses by default; OpenAI chat completions via
// openai.chat(); Anthropic messages; Gemini generateContent) a plain
// generateText, a streamText, a tool call run to its second step (so the
// tool's result goes back), and a structured output (Output.object).
import { generateText, streamText, tool, Output, stepCountIs, jsonSchema } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { z } from 'zod';
import { BASE, KEY, OPENAI_MODEL, ANTHROPIC_MODEL, GEMINI_MODEL, PROMPT, TOOL_PROMPT, JSON_PROMPT, weatherParams, weather, main } from './common.mjs';

const openai = createOpenAI({ baseURL: `${BASE}/v1`, apiKey: KEY });
const anthropic = createAnthropic({ baseURL: `${BASE}/v1`, apiKey: KEY });
const google = createGoogleGenerativeAI({ baseURL: `${BASE}/v1beta`, apiKey: KEY });

const models = {
  'openai-responses': () => openai(OPENAI_MODEL),
  'openai-chat': () => openai.chat(OPENAI_MODEL),
  anthropic: () => anthropic(ANTHROPIC_MODEL),
  google: () => google(GEMINI_MODEL),
};

const tools = {
  get_weather: tool({
    description: 'Get the weather for a city',
    inputSchema: jsonSchema(weatherParams),
    execute: async (args) => weather(args),
  }),
};

const cases = {};
for (const [name, model] of Object.entries(models)) {
  cases[`${name}-plain`] = async () => {
    const r = await generateText({ model: model(), system: 'You are terse.', prompt: PROMPT, maxOutputTokens: 100, temperature: 0.2, maxRetries: 0 });
    return r.text;
  };
  cases[`${name}-stream`] = async () => {
    const r = streamText({ model: model(), prompt: PROMPT, maxRetries: 0, onError: ({ error }) => { throw error; } });
    let text = '';
    for await (const t of r.textStream) text += t;
    return text;
  };
  cases[`${name}-tool`] = async () => {
    const r = await generateText({ model: model(), prompt: TOOL_PROMPT, tools, stopWhen: stepCountIs(2), maxRetries: 0 });
    return { text: r.text, steps: r.steps.length };
  };
  cases[`${name}-object`] = async () => {
    const r = await generateText({
      model: model(),
      prompt: JSON_PROMPT,
      output: Output.object({ schema: z.object({ city: z.string(), population: z.number().int() }) }),
      maxRetries: 0,
    });
    return r.output;
  };
}

await main(cases);

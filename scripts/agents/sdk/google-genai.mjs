// The official @google/genai SDK against the Gemini API (not Vertex):
// generateContent plain, streamed (streamGenerateContent?alt=sse), with a
// function declaration (and the follow-up with its functionResponse), with
// a JSON schema (responseJsonSchema and the older responseSchema), and
// countTokens / embedContent.
import { GoogleGenAI, Type } from '@google/genai';
import { BASE, KEY, GEMINI_MODEL as MODEL, PROMPT, TOOL_PROMPT, JSON_PROMPT, weatherParams, citySchema, weather, main, drain } from './common.mjs';

const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: BASE } });
const decl = { name: 'get_weather', description: 'Get the weather for a city', parametersJsonSchema: weatherParams };
const declOld = {
  name: 'get_weather',
  description: 'Get the weather for a city',
  parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING }, unit: { type: Type.STRING, enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] },
};

await main({
  'generate-plain': async () => {
    const r = await ai.models.generateContent({ model: MODEL, contents: PROMPT, config: { systemInstruction: 'You are terse.', temperature: 0.2, maxOutputTokens: 100 } });
    return r.text;
  },
  'generate-stream': async () => {
    const s = await ai.models.generateContentStream({ model: MODEL, contents: PROMPT });
    return drain(s, (c) => c.text);
  },
  'generate-tool': async () => {
    const contents = [{ role: 'user', parts: [{ text: TOOL_PROMPT }] }];
    const config = { tools: [{ functionDeclarations: [decl] }], toolConfig: { functionCallingConfig: { mode: 'AUTO' } } };
    const r = await ai.models.generateContent({ model: MODEL, contents, config });
    const calls = r.functionCalls || [];
    if (!calls.length) return r.text;
    contents.push(r.candidates[0].content);
    contents.push({ role: 'user', parts: calls.map((c) => ({ functionResponse: { id: c.id, name: c.name, response: { output: weather(c.args) } } })) });
    const r2 = await ai.models.generateContent({ model: MODEL, contents, config });
    return r2.text;
  },
  'generate-tool-openapi-schema': async () => {
    const r = await ai.models.generateContent({ model: MODEL, contents: TOOL_PROMPT, config: { tools: [{ functionDeclarations: [declOld] }], toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } } } });
    return r.functionCalls;
  },
  'generate-json-schema': async () => {
    const r = await ai.models.generateContent({ model: MODEL, contents: JSON_PROMPT, config: { responseMimeType: 'application/json', responseJsonSchema: citySchema } });
    return r.text;
  },
  'generate-response-schema': async () => {
    const r = await ai.models.generateContent({
      model: MODEL,
      contents: JSON_PROMPT,
      config: { responseMimeType: 'application/json', responseSchema: { type: Type.OBJECT, properties: { city: { type: Type.STRING }, population: { type: Type.INTEGER } }, required: ['city', 'population'], propertyOrdering: ['city', 'population'] } },
    });
    return r.text;
  },
  'generate-thinking': async () => {
    const r = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: PROMPT, config: { thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } } });
    return r.text;
  },
  'chat-session': async () => {
    const chat = ai.chats.create({ model: MODEL, history: [{ role: 'user', parts: [{ text: 'Hi' }] }, { role: 'model', parts: [{ text: 'Hello!' }] }] });
    const r = await chat.sendMessage({ message: PROMPT });
    return r.text;
  },
  'count-tokens': async () => ai.models.countTokens({ model: MODEL, contents: PROMPT }),
  'embed-content': async () => ai.models.embedContent({ model: 'gemini-embedding-001', contents: ['hello', 'world'] }),
});

// Shared bits of the SDK capture scripts. Each script is run as
//   node SCRIPT.mjs --list     prints its case names, one a line
//   node SCRIPT.mjs CASE       runs one case against CAPTURE_BASE
// CAPTURE_BASE is the capture proxy's origin (http://127.0.0.1:18301) and
// CAPTURE_KEY the key the mock upstream accepts. Every case makes the
// request(s) a typical application would make with that SDK; the answers
// come from tollgate's simulated upstream.

export const BASE = process.env.CAPTURE_BASE || 'http://127.0.0.1:18301';
export const KEY = process.env.CAPTURE_KEY || 'sk-tollgate-capture-0000';

export const OPENAI_MODEL = 'gpt-4o-mini';
export const ANTHROPIC_MODEL = 'claude-haiku-4-5';
export const GEMINI_MODEL = 'gemini-2.5-flash';

export const PROMPT = 'Say hello in one word.';
export const TOOL_PROMPT = 'What is the weather in Paris?';
export const JSON_PROMPT = 'Give the capital of France and its population.';

// The weather tool's parameters as a JSON schema.
export const weatherParams = {
  type: 'object',
  properties: {
    city: { type: 'string', description: 'City name' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};

// The structured answer's schema.
export const citySchema = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    population: { type: 'integer' },
  },
  required: ['city', 'population'],
  additionalProperties: false,
};

export function weather({ city, unit }) {
  return { city, unit, temperature: 21, conditions: 'sunny' };
}

export async function main(cases) {
  const arg = process.argv[2];
  if (!arg || arg === '--list') {
    console.log(Object.keys(cases).join('\n'));
    return;
  }
  const fn = cases[arg];
  if (!fn) {
    console.error(`unknown case ${arg}; cases: ${Object.keys(cases).join(', ')}`);
    process.exit(2);
  }
  try {
    const out = await fn();
    console.log(typeof out === 'string' ? out : JSON.stringify(out, null, 2));
  } catch (e) {
    console.error(`case ${arg} failed: ${e?.stack || e}`);
    process.exit(1);
  }
}

// drain reads an async iterable to its end and returns the text it carried.
export async function drain(stream, pick = (x) => x) {
  let text = '';
  for await (const ev of stream) {
    const t = pick(ev);
    if (typeof t === 'string') text += t;
  }
  return text;
}

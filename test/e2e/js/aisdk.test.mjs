// The Vercel AI SDK (ai, @ai-sdk/openai, @ai-sdk/anthropic), a stricter client than the
// official SDKs: it looks every server tool call of an answer up among the request's
// own tools. The fleet searches on its own when a question needs it, so an answer to a
// request that declared no web_search must carry that search as citations only, with
// no web_search_call or server_tool_use; one that declared it gets the tool's calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { baseURL, apiKey, model, searchPrompt, streamPrompt } from './common.mjs';

globalThis.AI_SDK_LOG_WARNINGS = false; // the simulator's model names are unknown to the SDK
const openai = createOpenAI({ baseURL: `${baseURL}/v1`, apiKey });
const anthropic = createAnthropic({ baseURL: `${baseURL}/v1`, apiKey });

// answer runs one request whole (generateText) or streamed (streamText), failing on
// any error the SDK reports, and returns what both give.
async function answer(streamed, params) {
  if (!streamed) return generateText({ ...params, maxRetries: 0 });
  let failure;
  const s = streamText({ ...params, prompt: streamPrompt, maxRetries: 0, onError: ({ error }) => { failure = error; } });
  const r = { text: await s.text, finishReason: await s.finishReason, sources: await s.sources, content: await s.content };
  if (failure) throw failure;
  return r;
}

const searchCalls = (r) => r.content.filter((c) => c.type === 'tool-call' || c.type === 'tool-result');

const cases = [
  { name: 'chat completions', model: () => openai.chat(model), declared: null },
  { name: 'responses', model: () => openai.responses(model), declared: null },
  { name: 'responses with web_search declared', model: () => openai.responses(model), declared: () => ({ web_search: openai.tools.webSearch({}) }) },
  { name: 'messages', model: () => anthropic(model), declared: null },
  { name: 'messages with web_search declared', model: () => anthropic(model), declared: () => ({ web_search: anthropic.tools.webSearch_20250305({}) }) },
];

for (const c of cases) {
  for (const streamed of [false, true]) {
    test(`ai sdk: ${c.name}, ${streamed ? 'streamed' : 'whole'}`, async () => {
      const r = await answer(streamed, { model: c.model(), prompt: searchPrompt, tools: c.declared?.() });
      assert.equal(r.finishReason, 'stop');
      assert.match(r.text, /\[1\]/, 'the answer cites no source');
      const calls = searchCalls(r);
      if (c.declared) {
        assert.ok(calls.length >= 2, `no web_search call and result in ${r.content.map((p) => p.type)}`);
        assert.ok(calls.every((p) => p.toolName === 'web_search'), JSON.stringify(calls.map((p) => p.toolName)));
        assert.ok(r.sources.length > 0, 'no sources');
      } else {
        assert.deepEqual(calls, [], 'a call of a tool the request did not declare');
      }
      // The Anthropic provider reads sources from web_search_tool_result blocks only;
      // the OpenAI ones read the text's url_citation annotations.
      if (!c.name.startsWith('messages')) assert.ok(r.sources.length > 0, 'no sources');
      assert.ok(r.sources.every((s) => /^https:\/\//.test(s.url)), JSON.stringify(r.sources));
    });
  }
}

// Thinking on a model that is not Claude (the simulator's Chat thinking model, which
// refuses a tool call turn without its reasoning_content): the SDK gets the reasoning
// as thinking blocks, runs the client tool and sends the blocks back with its result,
// which gives the model its reasoning_content back.
test('ai sdk: messages with thinking, a client tool round trip on a Chat thinking model', async () => {
  const r = await generateText({
    model: anthropic(model), prompt: 'Weather in Paris sim:tool=get_weather sim:nosearch', maxRetries: 0,
    tools: { get_weather: tool({ description: 'Current weather', inputSchema: z.object({ city: z.string() }), execute: async () => ({ temp_c: 18 }) }) },
    stopWhen: stepCountIs(3),
    providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 2048 } } },
  });
  assert.equal(r.steps.length, 2, `steps ${r.steps.map((s) => s.finishReason)}`);
  assert.equal(r.steps[0].finishReason, 'tool-calls');
  assert.ok(r.steps[0].reasoningText, 'no thinking in the tool call step');
  assert.equal(r.finishReason, 'stop');
});

// A three-turn conversation with web_search through the Responses provider, which
// (store: true, its default) sends each earlier turn's output back by id: every
// web_search_call, reasoning, function call and message of a stored response must be
// resolvable as an item_reference, on each kind of model behind the fleet.
for (const m of [model, 'sim-claude', 'sim-gemini']) {
  for (const streamed of [false, true]) {
    test(`ai sdk: responses, a three-turn web_search conversation by reference on ${m}, ${streamed ? 'streamed' : 'whole'}`, async () => {
      const messages = [];
      const questions = [searchPrompt, 'Search the web: and what about tomorrow in San Francisco?', 'Search the web: and in Paris?'];
      for (const [turn, question] of questions.entries()) {
        messages.push({ role: 'user', content: streamed ? `${question} sim:token-delay=2ms` : question });
        const params = { model: openai.responses(m), messages, tools: { web_search: openai.tools.webSearch({}) }, maxRetries: 0 };
        let r;
        if (streamed) {
          let failure;
          const s = streamText({ ...params, onError: ({ error }) => { failure = error; } });
          r = { text: await s.text, finishReason: await s.finishReason, content: await s.content, response: await s.response, request: await s.request };
          if (failure) throw failure;
        } else {
          r = await generateText(params);
        }
        assert.equal(r.finishReason, 'stop', `turn ${turn + 1}`);
        assert.ok(r.text, `turn ${turn + 1}: no text`);
        assert.ok(searchCalls(r).length >= 2, `turn ${turn + 1}: no web_search call in ${r.content.map((p) => p.type)}`);
        if (turn > 0) {
          const refs = JSON.stringify(r.request?.body ?? (await r.request)?.body ?? '');
          assert.match(refs, /item_reference/, `turn ${turn + 1} sent no item_reference`);
        }
        messages.push(...r.response.messages);
      }
      assert.ok(messages.length >= 6, `the conversation has ${messages.length} messages`);
    });
  }
}

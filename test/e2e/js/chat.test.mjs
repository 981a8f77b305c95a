// OpenAI Chat Completions through the official openai npm SDK.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { openai, model, searchPrompt, streamPrompt, plainPrompt, toolPrompt, weatherSchema, assertCitesAt, citationKeys, assertTypedError, assertCost } from './common.mjs';

const searchParams = { model, messages: [{ role: 'user', content: searchPrompt }] };
const weatherTool = { type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: weatherSchema } };

test('chat: an answer cites its sources as url_citation annotations', async () => {
  const { data: c, response } = await openai.chat.completions.create(searchParams).withResponse();
  const msg = c.choices[0].message;
  assert.equal(c.object, 'chat.completion');
  assertCost(c.usage.searchfleet, response.headers);
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.match(msg.content, /\[1\]/);
  assertCitesAt(msg.content, msg.annotations);
  assert.ok(c.usage.total_tokens > 0);
  assert.ok(c.searchfleet.searches >= 1 && c.searchfleet.sources.length > 0, JSON.stringify(c.searchfleet));
});

test('chat: the stream helper rebuilds the same answer, annotations included', async () => {
  const params = { model, messages: [{ role: 'user', content: streamPrompt }] };
  const whole = await openai.chat.completions.create(params);
  const stream = openai.chat.completions.stream(params);
  let deltas = '';
  stream.on('content.delta', ({ delta }) => { deltas += delta; });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const final = await stream.finalChatCompletion();
  const msg = final.choices[0].message;
  const want = whole.choices[0].message;
  assert.ok(chunks.length > 0 && chunks.every((c) => c.object === 'chat.completion.chunk'), 'malformed chunks');
  assert.equal(msg.content, want.content);
  assert.equal(deltas, want.content);
  assert.equal(final.choices[0].finish_reason, 'stop');
  assert.equal(chunks.filter((c) => c.usage).length, 1, 'usage on more than one chunk');
  assertCost(chunks.at(-1).usage?.searchfleet, null);
  assertCitesAt(msg.content, msg.annotations ?? []);
  assert.deepEqual(citationKeys(msg.annotations), citationKeys(want.annotations));
});

test('chat: a client tool call comes back untouched, streamed or not', async () => {
  const params = { model, messages: [{ role: 'user', content: toolPrompt }], tools: [weatherTool] };
  const c = await openai.chat.completions.create(params);
  assert.equal(c.choices[0].finish_reason, 'tool_calls');
  const calls = c.choices[0].message.tool_calls;
  assert.equal(calls?.length, 1, JSON.stringify(c.choices[0].message));
  assert.equal(calls[0].type, 'function');
  assert.equal(calls[0].function.name, 'get_weather');
  assert.ok(calls[0].id);
  assert.equal(typeof JSON.parse(calls[0].function.arguments), 'object');

  const final = await openai.chat.completions.stream(params).finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  const streamed = final.choices[0].message.tool_calls;
  assert.equal(streamed?.length, 1);
  assert.equal(streamed[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(streamed[0].function.arguments), JSON.parse(calls[0].function.arguments));

  const next = await openai.chat.completions.create({
    ...params,
    messages: [...params.messages, c.choices[0].message, { role: 'tool', tool_call_id: calls[0].id, content: '{"temp_c": 18}' }],
  });
  assert.equal(next.choices[0].finish_reason, 'stop');
  assert.ok(next.choices[0].message.content);
});

test('chat: web_search_options makes the fleet search and names what it cannot honour', async () => {
  const plain = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: plainPrompt }] });
  assert.equal(plain.searchfleet.searches, 0, 'searched without intent or a declaration');
  assert.deepEqual(plain.choices[0].message.annotations, []);

  const c = await openai.chat.completions.create({
    model, messages: [{ role: 'user', content: plainPrompt }],
    web_search_options: { search_context_size: 'low', user_location: { type: 'approximate', approximate: { country: 'FR', city: 'Paris' } } },
  });
  const msg = c.choices[0].message;
  assertCitesAt(msg.content, msg.annotations);
  assert.ok(c.searchfleet.searches >= 1);
  assert.ok(c.searchfleet.warnings?.some((w) => w.includes('city')), `no warning about the city: ${JSON.stringify(c.searchfleet)}`);
});

for (const [name, tool] of [
  ['{type: "web_search"} with engine, max uses and domains', { type: 'web_search', engine: 'brave', max_uses: 2, blocked_domains: ['example.com'] }],
  ['googleSearch', { googleSearch: {} }],
  ['$web_search', { type: 'builtin_function', function: { name: '$web_search' } }],
]) {
  test(`chat: the ${name} declaration gets a cited answer`, async () => {
    const c = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: plainPrompt }], tools: [tool] });
    const msg = c.choices[0].message;
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.equal(msg.tool_calls, undefined, 'the fleet returned its own tool call');
    assertCitesAt(msg.content, msg.annotations);
    assert.ok(c.searchfleet.searches >= 1 && c.searchfleet.searches <= 2, JSON.stringify(c.searchfleet));
  });
}

test('chat: bad input raises the SDK typed errors', async () => {
  await assertTypedError(() => openai.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.chat.completions.create({ model }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.chat.completions.create({ model, messages: 'hi' }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.chat.completions.create({ ...searchParams, tools: [{ type: 'web_search', engine: 'no-such-engine' }] }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.chat.completions.create({ ...searchParams, web_search_options: { search_context_size: 'huge' } }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.chat.completions.stream({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }).finalChatCompletion(), OpenAI.NotFoundError, 404);
  const bad = new OpenAI({ baseURL: openai.baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assertTypedError(() => bad.chat.completions.create(searchParams), OpenAI.AuthenticationError, 401);
});

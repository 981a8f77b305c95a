// Anthropic Messages through the official @anthropic-ai/sdk npm SDK.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { anthropic, baseURL, model, searchPrompt, streamPrompt, plainPrompt, toolPrompt, weatherSchema, assertTypedError, assertCost } from './common.mjs';

const webSearch = { type: 'web_search_20250305', name: 'web_search', max_uses: 3 };
const searchParams = { model, max_tokens: 1024, system: 'Answer briefly.', messages: [{ role: 'user', content: searchPrompt }], tools: [webSearch] };
const weatherTool = { name: 'get_weather', description: 'Current weather', input_schema: weatherSchema };

const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const citedURLs = (m) => m.content.flatMap((b) => (b.type === 'text' ? b.citations ?? [] : [])).map((c) => c.url).sort();

// assertCited checks an answer: server_tool_use and web_search_tool_result (titled
// results) per search, text blocks with web_search_result_location citations.
function assertCited(m) {
  assert.equal(m.stop_reason, 'end_turn');
  const uses = m.content.filter((b) => b.type === 'server_tool_use');
  const results = m.content.filter((b) => b.type === 'web_search_tool_result');
  assert.ok(uses.length >= 1 && results.length === uses.length, `content ${m.content.map((b) => b.type)}`);
  for (const u of uses) {
    assert.match(u.id, /^srvtoolu_/);
    assert.equal(u.name, 'web_search');
    assert.ok(u.input.query);
    assert.ok(results.some((r) => r.tool_use_id === u.id), `no result for ${u.id}`);
  }
  for (const r of results) {
    assert.ok(Array.isArray(r.content) && r.content.length > 0, JSON.stringify(r));
    for (const hit of r.content) {
      assert.equal(hit.type, 'web_search_result');
      assert.match(hit.url, /^https:\/\//);
      assert.ok(hit.title, `result without a title: ${JSON.stringify(hit)}`);
    }
  }
  const cites = m.content.flatMap((b) => (b.type === 'text' ? b.citations ?? [] : []));
  assert.ok(cites.length > 0, 'no citations');
  for (const c of cites) {
    assert.equal(c.type, 'web_search_result_location');
    assert.match(c.url, /^https:\/\//);
    assert.ok(c.encrypted_index);
  }
  assert.ok(m.usage.server_tool_use.web_search_requests >= 1, JSON.stringify(m.usage));
}

test('messages: server_tool_use, web_search_tool_result and cited text', async () => {
  const { data: m, response } = await anthropic.messages.create(searchParams).withResponse();
  assert.match(m.id, /^msg_/);
  assertCost(m.usage.searchfleet, response.headers);
  assert.equal(m.type, 'message');
  assert.match(textOf(m), /\[1\]/);
  assertCited(m);
});

test('messages: the stream helper rebuilds the same answer from well-formed events', async () => {
  const params = { ...searchParams, messages: [{ role: 'user', content: streamPrompt }] };
  const whole = await anthropic.messages.create(params);
  const stream = anthropic.messages.stream(params);
  const types = [];
  let deltas = '';
  stream.on('text', (delta) => { deltas += delta; });
  let delta;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'message_delta') delta = ev;
  }
  const final = await stream.finalMessage();
  assertCost(delta.usage.searchfleet, null);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  for (const want of ['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta']) {
    assert.ok(types.includes(want), `no ${want} in ${types.join(' ')}`);
  }
  const starts = types.filter((t) => t === 'content_block_start').length;
  assert.equal(types.filter((t) => t === 'content_block_stop').length, starts, 'unbalanced content blocks');
  assertCited(final);
  assert.equal(textOf(final), textOf(whole));
  assert.equal(deltas, textOf(whole));
  assert.deepEqual(citedURLs(final), citedURLs(whole));
});

test('messages: a client tool_use comes back untouched (stop_reason tool_use) and its result continues', async () => {
  const params = { model, max_tokens: 512, messages: [{ role: 'user', content: toolPrompt }], tools: [weatherTool] };
  const m = await anthropic.messages.create(params);
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(m.content));
  assert.equal(use.name, 'get_weather');
  assert.ok(use.id);
  assert.equal(typeof use.input, 'object');

  const final = await anthropic.messages.stream(params).finalMessage();
  assert.equal(final.stop_reason, 'tool_use');
  const streamed = final.content.find((b) => b.type === 'tool_use');
  assert.equal(streamed?.name, 'get_weather');
  assert.deepEqual(streamed.input, use.input);

  const next = await anthropic.messages.create({
    ...params,
    messages: [...params.messages, { role: 'assistant', content: m.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"temp_c": 18}' }] }],
  });
  assert.equal(next.stop_reason, 'end_turn');
  assert.ok(textOf(next));
});

test('messages: without a web_search tool a plain question is not searched', async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: plainPrompt }] });
  assert.equal(m.content.filter((b) => b.type === 'server_tool_use').length, 0);
});

for (const tool of [
  { type: 'web_search_20250305', name: 'web_search', max_uses: 2, blocked_domains: ['example.com'], user_location: { type: 'approximate', country: 'FR', timezone: 'Europe/Paris' } },
  { type: 'web_search_20260209', name: 'web_search' },
]) {
  test(`messages: the ${tool.type} server tool gets a cited answer`, async () => {
    const m = await anthropic.messages.create({ model, max_tokens: 1024, messages: [{ role: 'user', content: plainPrompt }], tools: [tool] });
    assertCited(m);
    if (tool.max_uses) assert.ok(m.usage.server_tool_use.web_search_requests <= tool.max_uses);
  });
}

test('messages: dated results carry page_age', async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 1024, messages: [{ role: 'user', content: `${plainPrompt} sim:engine=brave` }], tools: [webSearch] });
  assertCited(m);
  const hits = m.content.filter((b) => b.type === 'web_search_tool_result').flatMap((b) => b.content);
  assert.ok(hits.some((h) => typeof h.page_age === 'string' && h.page_age), `no page_age in ${JSON.stringify(hits)}`);
});

test('messages: bad input raises the SDK typed errors', async () => {
  const user = [{ role: 'user', content: 'hi' }];
  await assertTypedError(() => anthropic.messages.create({ model: 'no-such-model', max_tokens: 10, messages: user }), Anthropic.NotFoundError, 404);
  await assertTypedError(() => anthropic.messages.create({ model, messages: user }), Anthropic.BadRequestError, 400);
  await assertTypedError(() => anthropic.messages.create({ model, max_tokens: 10, messages: user, tools: [{ type: 'computer_20250124', name: 'computer', display_width_px: 1, display_height_px: 1 }] }), Anthropic.BadRequestError, 400);
  await assertTypedError(() => anthropic.messages.stream({ model: 'no-such-model', max_tokens: 10, messages: user }).finalMessage(), Anthropic.NotFoundError, 404);
  const bad = new Anthropic({ baseURL, apiKey: 'sk-wrong', authToken: null, maxRetries: 0 });
  await assertTypedError(() => bad.messages.create({ model, max_tokens: 10, messages: user }), Anthropic.AuthenticationError, 401);
});

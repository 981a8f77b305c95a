// OpenAI Responses through the official openai npm SDK.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { openai, model, searchPrompt, streamPrompt, plainPrompt, toolPrompt, weatherSchema, span, citationKeys, assertTypedError, assertCost } from './common.mjs';

const searchParams = { model, instructions: 'Answer briefly.', input: searchPrompt, tools: [{ type: 'web_search' }] };
const weatherTool = { type: 'function', name: 'get_weather', parameters: weatherSchema, strict: false };

// assertCited checks a completed response: a web_search_call item per search with its
// sources (titles included), then the message whose url_citation offsets point at [n].
function assertCited(r) {
  assert.equal(r.status, 'completed');
  const calls = r.output.filter((o) => o.type === 'web_search_call');
  assert.ok(calls.length >= 1, `no web_search_call in ${JSON.stringify(r.output)}`);
  for (const c of calls) {
    assert.equal(c.status, 'completed');
    assert.equal(c.action.type, 'search');
    assert.ok(c.action.query);
    assert.ok(c.action.sources.length > 0, 'search without sources');
    for (const s of c.action.sources) {
      assert.equal(s.type, 'url');
      assert.match(s.url, /^https:\/\//);
      assert.ok(s.title, `source without a title: ${JSON.stringify(s)}`);
    }
  }
  const msg = r.output.at(-1);
  assert.equal(msg.type, 'message');
  const anns = msg.content.flatMap((p) => p.annotations);
  assert.ok(anns.length > 0, 'no url_citation annotations');
  for (const a of anns) {
    assert.equal(a.type, 'url_citation');
    assert.match(a.url, /^https:\/\//);
    assert.match(span(r.output_text, a.start_index, a.end_index), /^\[\d+\]$/, `annotation ${JSON.stringify(a)} spans no [n] marker`);
  }
  return anns;
}

test('responses: web_search_call items, then a message with url_citation annotations', async () => {
  const { data: r, response } = await openai.responses.create(searchParams).withResponse();
  assert.match(r.id, /^resp_/);
  assertCost(r.usage.searchfleet, response.headers);
  assert.match(r.output_text, /\[1\]/);
  assertCited(r);
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  const again = await openai.responses.retrieve(r.id);
  assert.equal(again.output_text, r.output_text);
});

test('responses: the stream helper rebuilds the same answer from well-formed events', async () => {
  const params = { ...searchParams, input: streamPrompt };
  const whole = await openai.responses.create(params);
  const stream = openai.responses.stream(params);
  const types = [];
  const seqs = [];
  let deltas = '';
  for await (const ev of stream) {
    types.push(ev.type);
    seqs.push(ev.sequence_number);
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.deepEqual(seqs, seqs.map((_, i) => i), 'sequence numbers are not 0, 1, 2, …');
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.completed');
  for (const want of ['response.output_item.added', 'response.web_search_call.completed', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.annotation.added', 'response.output_text.done', 'response.output_item.done']) {
    assert.ok(types.includes(want), `no ${want} in ${types.join(' ')}`);
  }
  assert.ok(types.indexOf('response.web_search_call.completed') < types.indexOf('response.output_text.delta'), 'text before the search completed');
  assert.equal(final.output_text, whole.output_text);
  assertCost(final.usage.searchfleet, null); // response.completed's response.usage
  assert.equal(deltas, whole.output_text);
  assert.deepEqual(citationKeys(assertCited(final)), citationKeys(assertCited(whole)));
});

// The OpenAI quickstart's search question asked of a reasoning model: the SDK parses the
// reasoning summary item and the cited message, created whole and streamed alike.
test('responses: a reasoning model answers a search with its summary item and a cited message', async () => {
  const params = { model, input: 'Search the web: latest Go release?', tools: [{ type: 'web_search' }], reasoning: { effort: 'low', summary: 'auto' } };
  const assertReasoned = (r) => {
    const summary = r.output.filter((o) => o.type === 'reasoning').flatMap((o) => o.summary);
    assert.ok(summary.length > 0, `no reasoning summary in ${JSON.stringify(r.output)}`);
    for (const part of summary) {
      assert.equal(part.type, 'summary_text');
      assert.ok(part.text);
    }
    assert.ok(r.output_text, 'no output_text');
    // A stream that sent the answer's text before its reasoning was known adds the
    // reasoning item after the message; the cited message is checked without it.
    return assertCited({ ...r, output: r.output.filter((o) => o.type !== 'reasoning') });
  };
  const whole = await openai.responses.create(params);
  const stream = openai.responses.stream(params);
  let summaryDeltas = '';
  for await (const ev of stream) {
    if (ev.type === 'response.reasoning_summary_text.delta') summaryDeltas += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.ok(summaryDeltas, 'the stream carried no reasoning summary deltas');
  assert.deepEqual(citationKeys(assertReasoned(final)), citationKeys(assertReasoned(whole)));
  assert.equal(final.output_text, whole.output_text);
});

test('responses: a client function call comes back untouched and its output continues', async () => {
  const params = { model, input: toolPrompt, tools: [weatherTool] };
  const r = await openai.responses.create(params);
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'get_weather');
  assert.ok(call.call_id);
  assert.equal(typeof JSON.parse(call.arguments), 'object');

  const final = await openai.responses.stream(params).finalResponse();
  const streamed = final.output.find((o) => o.type === 'function_call');
  assert.equal(streamed?.name, 'get_weather');
  assert.deepEqual(JSON.parse(streamed.arguments), JSON.parse(call.arguments));

  const next = await openai.responses.create({
    model, tools: [weatherTool],
    input: [{ role: 'user', content: toolPrompt }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 18}' }],
  });
  assert.equal(next.status, 'completed');
  assert.ok(next.output_text);
});

test('responses: without a web_search tool a plain question is not searched', async () => {
  const r = await openai.responses.create({ model, input: plainPrompt });
  assert.equal(r.output.filter((o) => o.type === 'web_search_call').length, 0);
});

for (const tool of [
  { type: 'web_search', search_context_size: 'low', user_location: { type: 'approximate', country: 'FR', city: 'Paris' } },
  { type: 'web_search_preview' },
]) {
  test(`responses: the ${tool.type} tool gets a cited answer`, async () => {
    const r = await openai.responses.create({ model, input: plainPrompt, tools: [tool] });
    assertCited(r);
    if (tool.user_location) assert.match(JSON.stringify(r), /user_location\.city/, 'no note on the city the fleet cannot honour');
  });
}

test('responses: bad input raises the SDK typed errors', async () => {
  await assertTypedError(() => openai.responses.create({ model: 'no-such-model', input: 'hi' }), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.responses.create({ model }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.responses.create({ model, input: 42 }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.responses.create({ model, input: 'hi', tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.responses.retrieve('resp_doesnotexist'), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.responses.stream({ model: 'no-such-model', input: 'hi' }).finalResponse(), OpenAI.NotFoundError, 404);
});

test('responses: a background response is cancelled; a finished or foreground one cannot be', async () => {
  const bg = await openai.responses.create({ model, input: 'Tell me a long story. sim:nosearch sim:model-slow=30s', background: true });
  assert.ok(['queued', 'in_progress'].includes(bg.status), bg.status);
  const cancelled = await openai.responses.cancel(bg.id);
  assert.equal(cancelled.id, bg.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await openai.responses.cancel(bg.id)).status, 'cancelled', 'cancelling again is not the same answer');
  assert.equal((await openai.responses.retrieve(bg.id)).status, 'cancelled');
  const done = await openai.responses.create({ model, input: 'Hello. sim:nosearch' });
  await assertTypedError(() => openai.responses.cancel(done.id), OpenAI.BadRequestError, 400);
  await assertTypedError(() => openai.responses.cancel('resp_doesnotexist'), OpenAI.NotFoundError, 404);
});

test('responses: input items page through the input; a deleted response is not found', async () => {
  const input = ['One. sim:nosearch', 'Two.', 'Three.'].map((text) => ({ role: 'user', content: text }));
  const r = await openai.responses.create({ model, input });
  const first = await openai.responses.inputItems.list(r.id, { limit: 2 });
  assert.equal(first.data.length, 2);
  assert.ok(first.has_more, 'the first page says there is no more');
  const texts = [];
  for await (const item of openai.responses.inputItems.list(r.id, { limit: 2 })) {
    assert.equal(item.type, 'message');
    assert.ok(item.id, `an item without an id: ${JSON.stringify(item)}`);
    texts.push(item.content[0].text);
  }
  assert.deepEqual(texts, ['Three.', 'Two.', 'One. sim:nosearch'], 'newest first by default');
  const asc = await openai.responses.inputItems.list(r.id, { order: 'asc' });
  assert.deepEqual(asc.data.map((i) => i.content[0].text), ['One. sim:nosearch', 'Two.', 'Three.']);

  await openai.responses.delete(r.id);
  await assertTypedError(() => openai.responses.retrieve(r.id), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.responses.inputItems.list(r.id), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.responses.create({ model, input: 'Go on. sim:nosearch', previous_response_id: r.id }), OpenAI.BadRequestError, 400);
});

test('responses: a conversation holds items, and two turns that name it build on each other', async () => {
  const conv = await openai.conversations.create({ metadata: { topic: 'names' }, items: [{ type: 'message', role: 'user', content: 'My name is Ada. sim:nosearch' }] });
  assert.match(conv.id, /^conv_/);
  assert.equal(conv.object, 'conversation');
  assert.deepEqual(conv.metadata, { topic: 'names' });
  assert.equal((await openai.conversations.retrieve(conv.id)).id, conv.id);

  const first = await openai.responses.create({ model, conversation: conv.id, input: 'Remember that. sim:nosearch' });
  assert.equal(first.status, 'completed');
  assert.equal(first.conversation?.id, conv.id);
  const second = await openai.responses.create({ model, conversation: { id: conv.id }, input: 'What is my name? sim:nosearch' });
  assert.equal(second.status, 'completed');

  const items = [];
  for await (const item of openai.conversations.items.list(conv.id, { order: 'asc', limit: 2 })) items.push(item);
  assert.deepEqual(items.map((i) => i.type), ['message', 'message', 'message', 'message', 'message'], JSON.stringify(items));
  assert.deepEqual(items.map((i) => i.role), ['user', 'user', 'assistant', 'user', 'assistant']);
  assert.equal(items[2].id, first.output.at(-1).id, 'the first answer is not in the conversation by its id');
  assert.equal(items[4].id, second.output.at(-1).id);
  // The second turn ran on the whole conversation: its stored input begins with it.
  const got = await openai.conversations.items.retrieve(items[2].id, { conversation_id: conv.id });
  assert.equal(got.id, items[2].id);

  const added = await openai.conversations.items.create(conv.id, { items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'P.S.' }] }] });
  assert.equal(added.data.length, 1);
  assert.ok(added.data[0].id);
  await openai.conversations.items.delete(added.data[0].id, { conversation_id: conv.id });
  await assertTypedError(() => openai.conversations.items.retrieve(added.data[0].id, { conversation_id: conv.id }), OpenAI.NotFoundError, 404);

  const updated = await openai.conversations.update(conv.id, { metadata: { topic: 'ada' } });
  assert.deepEqual(updated.metadata, { topic: 'ada' });
  const deleted = await openai.conversations.delete(conv.id);
  assert.equal(deleted.deleted, true);
  await assertTypedError(() => openai.conversations.retrieve(conv.id), OpenAI.NotFoundError, 404);
  await assertTypedError(() => openai.responses.create({ model, conversation: conv.id, input: 'hi sim:nosearch' }), OpenAI.NotFoundError, 404);
});

// A research run through the official openai npm SDK's deep-research flow:
// responses.create({background: true, model: "research/…"}), responses.retrieve until
// completed, responses.cancel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, model, span } from './common.mjs';

const researchModel = `research/${model}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(id, done) {
  for (let i = 0; i < 600; i++) {
    const r = await openai.responses.retrieve(id);
    if (done(r)) return r;
    await sleep(100);
  }
  throw new Error(`response ${id} never got there`);
}

test('research: background create, retrieve until completed, url_citation on searched sources', async () => {
  const created = await openai.responses.create({ background: true, model: researchModel, input: 'How do tides work?', tools: [{ type: 'web_search' }] });
  assert.match(created.id, /^rr_/);
  assert.ok(['queued', 'in_progress'].includes(created.status), created.status);
  assert.equal(created.background, true);
  const r = await until(created.id, (x) => !['queued', 'in_progress'].includes(x.status));
  assert.equal(r.status, 'completed');
  const calls = r.output.filter((o) => o.type === 'web_search_call');
  assert.ok(calls.length >= 3, `${calls.length} web_search_call items`);
  for (const c of calls) {
    assert.equal(c.status, 'completed');
    assert.ok(c.action.query);
  }
  const msg = r.output.at(-1);
  assert.equal(msg.type, 'message');
  const anns = msg.content.flatMap((p) => p.annotations);
  assert.ok(anns.length > 0, 'no url_citation annotations');
  // Every citation is a source the run's children searched (the run's own view).
  const run = await (await fetch(`${openai.baseURL}/research/${r.id}`, { headers: { Authorization: `Bearer ${openai.apiKey}` } })).json();
  const searched = new Set(run.rounds.flatMap((rd) => rd.questions.flatMap((q) => (q.sources || []).map((s) => s.url))));
  for (const a of anns) {
    assert.equal(a.type, 'url_citation');
    assert.ok(searched.has(a.url), `${a.url} was not searched`);
    assert.match(span(r.output_text, a.start_index, a.end_index), /^\[\d+\]$/);
  }
});

test('research: responses.cancel ends the run cancelled', async () => {
  const created = await openai.responses.create({ background: true, model: researchModel, input: 'Why is the sea salty? sim:model-slow=3s', tools: [{ type: 'web_search' }] });
  const cancelled = await openai.responses.cancel(created.id);
  assert.equal(cancelled.status, 'cancelled');
  const r = await openai.responses.retrieve(created.id);
  assert.equal(r.status, 'cancelled');
});

test('research: background stream, resumed with starting_after, repeats nothing', async () => {
  const seen = [];
  let id;
  const stream = await openai.responses.create({ background: true, stream: true, model: researchModel, input: 'How do glaciers move?', tools: [{ type: 'web_search' }] });
  for await (const ev of stream) {
    seen.push([ev.sequence_number, ev.type]);
    if (ev.type === 'response.created') id = ev.response.id;
    if (ev.type === 'response.output_item.done') break; // the client goes away after the first search
  }
  assert.match(id, /^rr_/);
  const last = seen.at(-1)[0];
  let final;
  const resumed = await openai.responses.retrieve(id, { stream: true, starting_after: last });
  for await (const ev of resumed) {
    seen.push([ev.sequence_number, ev.type]);
    if (ev.type === 'response.completed') final = ev.response;
  }
  seen.forEach(([seq], i) => assert.equal(seq, i, `event ${i} has sequence_number ${seq}`));
  assert.equal(final?.status, 'completed');
  const anns = final.output.filter((o) => o.type === 'message').flatMap((m) => m.content.flatMap((p) => p.annotations));
  assert.ok(final.output.some((o) => o.type === 'web_search_call') && anns.length > 0, 'no searches or citations');
});

// OpenAI's deep-research flow unchanged: "o3-deep-research" is mapped to the
// openai-deep-research agent in config, so the run is carried out at the (simulated)
// provider, and its report's url_citation annotations come back through retrieve.
test('research agent: o3-deep-research runs the openai-deep-research agent; retrieve until completed; cancel', async () => {
  const created = await openai.responses.create({ background: true, model: 'o3-deep-research', input: 'How deep is Lake Baikal? sim:agent-time=1s', tools: [{ type: 'web_search_preview' }] });
  assert.match(created.id, /^rr_/);
  const r = await until(created.id, (x) => !['queued', 'in_progress'].includes(x.status));
  assert.equal(r.status, 'completed');
  const anns = r.output.at(-1).content.flatMap((p) => p.annotations);
  assert.ok(anns.length > 0, 'no url_citation annotations');
  const run = await (await fetch(`${openai.baseURL}/research/${r.id}`, { headers: { Authorization: `Bearer ${openai.apiKey}` } })).json();
  assert.equal(run.agent, 'openai-deep-research');

  const long = await openai.responses.create({ background: true, model: 'o3-deep-research', input: 'How deep is Lake Tanganyika? sim:agent-time=1h', tools: [{ type: 'web_search_preview' }] });
  const cancelled = await openai.responses.cancel(long.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await openai.responses.retrieve(long.id)).status, 'cancelled');
});

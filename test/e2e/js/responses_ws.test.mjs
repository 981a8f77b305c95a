// Responses WebSocket mode and compaction through the official openai npm SDK
// (ResponsesWS from openai/resources/responses/ws, on the ws package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { openai, model } from './common.mjs';

// connect opens a socket whose error events are read as events (turn): the SDK also
// emits each as an 'error', which needs a listener.
function connect() {
  const rws = new ResponsesWS(openai);
  rws.on('error', () => {});
  return rws;
}

// turn sends one response.create and resolves with the turn's events and its terminal
// response, or its error event.
function turn(rws, body) {
  return new Promise((resolve, reject) => {
    const events = [];
    const timer = setTimeout(() => { done(); reject(new Error(`no terminal event for ${JSON.stringify(body)}`)); }, 60_000);
    const onEvent = (ev) => {
      events.push(ev);
      if (ev.type === 'error') {
        done();
        resolve({ events, error: ev });
      } else if (['response.completed', 'response.failed', 'response.incomplete'].includes(ev.type)) {
        done();
        resolve({ events, response: ev.response });
      }
    };
    function done() {
      clearTimeout(timer);
      rws.off('event', onEvent);
    }
    rws.on('event', onEvent);
    rws.send({ type: 'response.create', model, ...body });
  });
}

test('responses websocket: turns follow one another, a store:false response continues on its socket only', async () => {
  const rws = connect();
  try {
    const first = await turn(rws, { store: false, input: 'Remember the code word: cobalt. Reply with OK. sim:nosearch' });
    assert.equal(first.response?.status, 'completed', JSON.stringify(first.error));
    assert.equal(first.events[0].type, 'response.created');
    const seqs = first.events.map((e) => e.sequence_number);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'sequence numbers out of order');
    assert.ok(first.events.some((e) => e.type === 'response.output_text.delta'));

    const second = await turn(rws, { store: false, previous_response_id: first.response.id, input: 'What is the code word? sim:nosearch' });
    assert.equal(second.response?.status, 'completed', JSON.stringify(second.error));
    assert.equal(second.response.previous_response_id, first.response.id);

    // A response.create sent while a response runs is refused; the running one ends.
    const seen = await new Promise((resolve) => {
      const got = { error: null, response: null };
      const onEvent = (ev) => {
        if (ev.type === 'error') got.error = ev;
        if (ev.type === 'response.completed') got.response = ev.response;
        if (got.error && got.response) {
          rws.off('event', onEvent);
          resolve(got);
        }
      };
      rws.on('event', onEvent);
      rws.send({ type: 'response.create', model, input: 'Count from 1 to 3. sim:nosearch' });
      rws.send({ type: 'response.create', model, input: 'meanwhile' });
    });
    assert.equal(seen.error.error.code, 'response_in_progress');
    assert.equal(seen.error.status, 409);
    assert.equal(seen.response.status, 'completed');

    const other = connect();
    try {
      const miss = await turn(other, { store: false, previous_response_id: first.response.id, input: 'Continue.' });
      assert.equal(miss.error?.error.code, 'previous_response_not_found');
      assert.equal(miss.error.status, 400);
    } finally {
      other.close();
    }
  } finally {
    rws.close();
  }
});

test('responses compact: the SDK compacts, and the window starts a new response on a socket', async () => {
  const compacted = await openai.responses.compact({
    model,
    input: [
      { type: 'message', role: 'user', content: 'Remember the compaction code word: slate.' },
      { type: 'message', role: 'assistant', content: 'OK.' },
    ],
  });
  assert.equal(compacted.object, 'response.compaction');
  assert.equal(compacted.output.at(-1).type, 'compaction');
  assert.ok(compacted.output.at(-1).encrypted_content);
  assert.ok(compacted.output.slice(0, -1).every((it) => it.type === 'message' && it.role === 'user'));

  const rws = connect();
  try {
    const t = await turn(rws, { store: false, input: [...compacted.output, { type: 'message', role: 'user', content: 'Continue. sim:nosearch' }] });
    assert.equal(t.response?.status, 'completed', JSON.stringify(t.error));
  } finally {
    rws.close();
  }
});

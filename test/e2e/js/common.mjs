// Shared setup of the SDK tests: clients for the fleet that sdk_npm_test.go started,
// the prompts the simulator model answers predictably, and checks used by every
// protocol. The fleet's address and API key come from the environment.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./test/e2e (sdk_npm_test.go)`);
  return v;
}

export const baseURL = env('FLEET_BASE_URL');
export const apiKey = env('FLEET_API_KEY');
export const model = env('FLEET_MODEL');

export const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
export const anthropic = new Anthropic({ baseURL, apiKey, authToken: null, maxRetries: 0, timeout: 60_000 });

// searchPrompt shows search intent: the fleet offers web_search and the model searches.
export const searchPrompt = 'Search the web: what is the weather in San Francisco today?';
// streamPrompt is searchPrompt with the simulator's tokens 5 ms apart when the model is
// streamed, so a fleet that relays tokens delivers the answer in many deltas; the
// answer is the same as searchPrompt's.
export const streamPrompt = `${searchPrompt} sim:token-delay=5ms`;
// plainPrompt shows no search intent, so the fleet offers no tool unless the request
// declares search; when offered one, the simulator model searches.
export const plainPrompt = 'Tell me about the Eiffel Tower sim:search';
// toolPrompt makes the simulator model call the client's get_weather tool.
export const toolPrompt = 'Weather in Paris sim:tool=get_weather sim:nosearch';
export const weatherSchema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

// codePoints slices text by code points, the unit of the fleet's citation offsets.
export function span(text, start, end) {
  return Array.from(text).slice(start, end).join('');
}

// assertCitesAt checks OpenAI url_citation offsets: each span is an [n] marker.
export function assertCitesAt(text, anns) {
  assert.ok(anns.length > 0, `no url_citation annotations on ${JSON.stringify(text)}`);
  for (const a of anns) {
    const c = a.url_citation ?? a;
    assert.equal(a.type, 'url_citation');
    assert.match(c.url, /^https:\/\//);
    assert.ok(c.title, `annotation without a title: ${JSON.stringify(a)}`);
    assert.match(span(text, c.start_index, c.end_index), /^\[\d+\]$/, `annotation ${JSON.stringify(a)} spans no [n] marker`);
  }
}

// citationKeys is a citation list in a comparable order: each citation with its
// fields sorted (a streamed and a whole answer may list them in another order).
export function citationKeys(list) {
  const canon = (v) => (Array.isArray(v) ? v.map(canon)
    : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v);
  return list.map((c) => JSON.stringify(canon(c))).sort();
}

// assertTypedError runs fn and checks it rejects with the SDK's typed error class.
export async function assertTypedError(fn, Class, status) {
  await assert.rejects(fn, (err) => {
    assert.ok(err instanceof Class, `want ${Class.name}, got ${err?.constructor?.name}: ${err?.message}`);
    assert.equal(err.status, status);
    assert.ok(err.message, 'error without a message');
    return true;
  });
}

// assertCost checks what a job cost, usage.searchfleet (sf), in the answer's headers
// (null for a streamed answer: only the body has it): X-Searchfleet-Cost-Usd and the
// counts of searches and fetches, paid and cached, say what the body says.
export function assertCost(sf, headers) {
  assert.ok(sf && typeof sf.cost_usd === 'number' && sf.searches >= 1, `usage.searchfleet ${JSON.stringify(sf)}`);
  for (const k of ['searches_cached', 'fetches', 'fetches_cached']) assert.equal(typeof sf[k], 'number', `usage.searchfleet.${k}`);
  if (!headers) return;
  assert.equal(Number(headers.get('x-searchfleet-cost-usd')), sf.cost_usd, 'X-Searchfleet-Cost-Usd');
  for (const k of ['searches', 'searches_cached', 'fetches', 'fetches_cached']) {
    const h = `x-searchfleet-${k.replace('_', '-')}`;
    assert.equal(headers.get(h), String(sf[k]), h);
  }
}

// The fleet's MCP server (/mcp, streamable HTTP) through the official TypeScript MCP
// client, @modelcontextprotocol/sdk: tools listed and called with the tenant's key,
// results marked untrusted, tool errors in words, and no session without the key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { baseURL, apiKey, model, searchPrompt } from './common.mjs';

const endpoint = new URL(`${baseURL}/mcp`);

async function connect(key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const client = new Client({ name: 'searchfleet-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(endpoint, { requestInit: { headers } }));
  return client;
}

function textOf(res) {
  return res.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

function assertUntrusted(res) {
  assert.equal(res._meta?.['searchfleet/untrusted'], true, `result not marked untrusted: ${JSON.stringify(res._meta)}`);
  assert.equal(res.content[0]._meta?.['searchfleet/untrusted'], true);
  const m = textOf(res).match(/<untrusted_web_content id="([0-9a-f]{16})">\n[\s\S]+\n<\/untrusted_web_content id="([0-9a-f]{16})">$/);
  assert.ok(m && m[1] === m[2], `text not inside untrusted delimiters:\n${textOf(res)}`);
}

// A page on loopback for web_fetch (the test fleet allows 127.0.0.0/8 to be fetched).
let page;
let pageURL;
let client;
before(async () => {
  page = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<html><head><title>Harbour tides</title></head><body><p>High tide at 06:12 and 18:40.</p></body></html>');
  });
  await new Promise((resolve) => page.listen(0, '127.0.0.1', resolve));
  pageURL = `http://127.0.0.1:${page.address().port}/tides`;
  client = await connect(apiKey);
});
after(async () => {
  await client?.close();
  page?.close();
});

test('mcp: the tools are listed with their schemas and annotations', async () => {
  assert.equal(client.getServerVersion().name, 'searchfleet');
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['ask', 'cancel_job', 'get_job', 'submit_research', 'web_fetch', 'web_search']);
  const search = tools.find((t) => t.name === 'web_search');
  assert.deepEqual(search.inputSchema.required, ['query']);
  assert.ok(search.inputSchema.properties.engine.enum.includes('brave'));
  for (const p of ['recency', 'count', 'allowed_domains', 'blocked_domains']) assert.ok(search.inputSchema.properties[p], p);
  for (const n of ['web_search', 'web_fetch', 'ask']) {
    const a = tools.find((t) => t.name === n).annotations;
    assert.equal(a.openWorldHint, true, n);
    assert.equal(a.readOnlyHint, true, n);
  }
});

test('mcp: web_search returns normalized results with URLs', async () => {
  const res = await client.callTool({ name: 'web_search', arguments: { query: 'harbour tides', engine: 'brave', count: 3, allowed_domains: [] } });
  assert.ok(!res.isError, textOf(res));
  const r = res.structuredContent;
  assert.equal(r.engine, 'brave');
  assert.ok(r.results.length > 0);
  for (const h of r.results) {
    assert.match(h.url, /^https:\/\//);
    assert.ok(textOf(res).includes(h.url), `${h.url} missing from the text`);
  }
  assertUntrusted(res);

  const bad = await client.callTool({ name: 'web_search', arguments: { query: 'x', engine: 'no-such-engine' } });
  assert.equal(bad.isError, true);
  assert.match(textOf(bad), /Unknown engine "no-such-engine"/);
});

test('mcp: web_fetch reads a page and refuses a metadata address', async () => {
  const res = await client.callTool({ name: 'web_fetch', arguments: { url: pageURL } });
  assert.ok(!res.isError, textOf(res));
  assert.equal(res.structuredContent.title, 'Harbour tides');
  assert.equal(res.structuredContent.status, 200);
  assert.match(textOf(res), /High tide at 06:12/);
  assertUntrusted(res);

  const refused = await client.callTool({ name: 'web_fetch', arguments: { url: 'http://169.254.169.254/latest/meta-data/' } });
  assert.equal(refused.isError, true);
  assert.match(textOf(refused), /^The page could not be fetched: .*refused/);
});

test('mcp: ask answers with citations and its sources', async () => {
  const res = await client.callTool({ name: 'ask', arguments: { question: searchPrompt, model } });
  assert.ok(!res.isError, textOf(res));
  const a = res.structuredContent;
  assert.match(a.answer, /\[1\]/);
  assert.ok(a.searches >= 1);
  assert.ok(a.sources.length > 0 && a.sources.every((s) => /^https:\/\//.test(s.url) && s.title));
  for (const c of a.citations) assert.match(Array.from(a.answer).slice(c.start, c.end).join(''), /^\[\d+\]$/);
  assert.match(textOf(res), /Sources:\n\[1\] /);
  assertUntrusted(res);

  const bad = await client.callTool({ name: 'ask', arguments: { question: 'hi', model: 'no-such-model' } });
  assert.equal(bad.isError, true);
  assert.match(textOf(bad), /no-such-model/);
});

test('mcp: submit_research starts a research run read with get_job', async () => {
  const sub = await client.callTool({ name: 'submit_research', arguments: { question: searchPrompt, model } });
  assert.ok(!sub.isError, textOf(sub));
  const id = sub.structuredContent.job_id;
  assert.match(id, /^rr_/);
  let job;
  for (let i = 0; i < 300; i++) {
    job = await client.callTool({ name: 'get_job', arguments: { job_id: id } });
    if (job.structuredContent?.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(job.structuredContent.status, 'completed', textOf(job));
  assert.match(job.structuredContent.answer.answer, /\[1\]/);
  assert.match(job.structuredContent.answer.answer, /## Sources/);
  assertUntrusted(job);
});

test('mcp: no session without the tenant key', async () => {
  for (const key of [undefined, 'sk-wrong']) {
    await assert.rejects(connect(key), (err) => {
      assert.ok(err instanceof StreamableHTTPError, `${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.code, 401);
      assert.match(err.message, /API key/);
      return true;
    });
  }
});

// inspect runs the MCP inspector's CLI (mcp-inspector --cli) against /mcp and returns
// its JSON output; its catalog file goes to a temporary directory, not $HOME, which is
// removed after the run.
async function inspect(args, key = apiKey) {
  const bin = path.join(import.meta.dirname, 'node_modules', '.bin', 'mcp-inspector');
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-inspector-'));
  const headers = key ? ['--header', `Authorization: Bearer ${key}`] : [];
  try {
    const { stdout } = await promisify(execFile)(bin, ['--cli', endpoint.href, '--transport', 'http', ...headers, ...args],
      { timeout: 60_000, env: { ...process.env, MCP_CATALOG_PATH: path.join(dir, 'mcp.json') } });
    return JSON.parse(stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('mcp inspector CLI: lists the tools and calls web_search and web_fetch', async () => {
  const list = await inspect(['--method', 'tools/list']);
  assert.deepEqual(list.tools.map((t) => t.name).sort(), ['ask', 'cancel_job', 'get_job', 'submit_research', 'web_fetch', 'web_search']);
  const search = await inspect(['--method', 'tools/call', '--tool-name', 'web_search', '--tool-arg', 'query=harbour tides', '--tool-arg', 'engine=brave']);
  assert.ok(!search.isError, JSON.stringify(search));
  assert.ok(search.structuredContent.results.length > 0);
  const fetched = await inspect(['--method', 'tools/call', '--tool-name', 'web_fetch', '--tool-arg', `url=${pageURL}`]);
  assert.ok(!fetched.isError, JSON.stringify(fetched));
  assert.equal(fetched.structuredContent.title, 'Harbour tides');
  // Without a key the server answers 401; the inspector would start an OAuth flow,
  // which --stored-auth-only turns into an error.
  await assert.rejects(inspect(['--stored-auth-only', '--method', 'tools/list'], ''), /auth_required|401/);
});

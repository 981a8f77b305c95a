// h2server.js: Node's built-in http2 server for internal/h2async's interop and
// differential tests. It serves the routes of the Go backend in interop_test.go
// (same paths, same answers) plus Node-only cases (push, GOAWAY, RST_STREAM), on
// 127.0.0.1 and a port of the system's choosing, printed as {"port": N} on stdout.
//
//   node h2server.js key.pem cert.pem
'use strict';
const http2 = require('http2');
const fs = require('fs');
const zlib = require('zlib');
const crypto = require('crypto');

const [keyFile, certFile] = process.argv.slice(2);
const server = http2.createSecureServer({
  key: fs.readFileSync(keyFile),
  cert: fs.readFileSync(certFile),
  allowHTTP1: false,
  settings: { maxConcurrentStreams: 100 },
});

let sessions = 0;
server.on('session', (session) => {
  session.fleetID = ++sessions;
});

// pattern is the deterministic body of /bytes: byte i is i mod 251.
function pattern(n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = i % 251;
  return b;
}

// send writes buf in chunks, waiting for 'drain' when the peer's window is full,
// so a slow reader makes this stream wait rather than Node buffer it all.
function send(stream, buf, done) {
  let off = 0;
  const step = () => {
    while (off < buf.length) {
      const chunk = buf.subarray(off, off + 16384);
      off += chunk.length;
      if (!stream.write(chunk)) {
        stream.once('drain', step);
        return;
      }
    }
    done();
  };
  step();
}

function readBody(stream, cb) {
  const parts = [];
  stream.on('data', (c) => parts.push(c));
  stream.on('end', () => cb(Buffer.concat(parts)));
}

server.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  // Consuming the request side keeps Node from closing a finished response with
  // RST_STREAM(NO_ERROR) while its last DATA still waits for flow-control window:
  // Node does that to a stream whose request body was never read (a GET).
  if (headers[':method'] === 'GET' || headers[':method'] === 'HEAD') stream.resume();
  const url = new URL(headers[':path'], 'https://127.0.0.1');
  const q = (k, d) => (url.searchParams.has(k) ? url.searchParams.get(k) : d);
  const session = stream.session;
  const base = { 'x-session': String(session.fleetID), 'x-server': 'node' };
  switch (url.pathname) {
    case '/echo':
      readBody(stream, (body) => {
        stream.respond({ ...base, ':status': 200, 'content-type': headers['content-type'] || 'application/octet-stream',
          'x-method': headers[':method'], 'x-sha256': crypto.createHash('sha256').update(body).digest('hex'),
          'content-length': body.length });
        if (headers[':method'] === 'HEAD') return stream.end();
        send(stream, body, () => stream.end());
      });
      return;
    case '/bytes': {
      const n = Number(q('n', '0'));
      stream.respond({ ...base, ':status': 200, 'content-type': 'application/octet-stream', 'content-length': n });
      if (headers[':method'] === 'HEAD') return stream.end();
      send(stream, pattern(n), () => stream.end());
      return;
    }
    case '/status': {
      const code = Number(q('code', '200'));
      const h = { ...base, ':status': code, 'content-type': 'text/plain; charset=utf-8' };
      if (code === 503) h['retry-after'] = '7';
      if (code === 204 || code === 304 || headers[':method'] === 'HEAD') {
        stream.respond(h, { endStream: true });
        return;
      }
      stream.respond(h);
      stream.end('status ' + code + '\n');
      return;
    }
    case '/headers': {
      const h = { ...base, ':status': 200, 'content-type': 'text/plain; charset=utf-8', 'x-multi': ['one', 'two'] };
      for (const [k, v] of Object.entries(headers)) {
        if (k.startsWith('x-')) h['x-echo-' + k.slice(2)] = v;
      }
      stream.respond(h);
      stream.end('headers\n');
      return;
    }
    case '/sse': {
      const n = Number(q('n', '3'));
      stream.respond({ ...base, ':status': 200, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      let i = 0;
      const tick = () => {
        if (i === n) return stream.end('data: [DONE]\n\n');
        stream.write('data: {"n":' + i++ + '}\n\n');
        setTimeout(tick, 5);
      };
      tick();
      return;
    }
    case '/stall':
      stream.respond({ ...base, ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: first\n\n');
      return; // nothing more until the client gives up
    case '/text': {
      const text = Buffer.from('the quick brown fox jumps over the lazy dog\n'.repeat(Number(q('n', '1000'))));
      const h = { ...base, ':status': 200, 'content-type': 'text/plain; charset=utf-8', vary: 'Accept-Encoding' };
      if (/\bgzip\b/.test(headers['accept-encoding'] || '')) {
        h['content-encoding'] = 'gzip';
        stream.respond(h);
        stream.end(zlib.gzipSync(text));
      } else {
        stream.respond(h);
        stream.end(text);
      }
      return;
    }
    case '/abort':
      // Headers and part of the body, then RST_STREAM(INTERNAL_ERROR): destroy resets at
      // once, where stream.close(code) would first end the stream cleanly.
      stream.respond({ ...base, ':status': 200, 'content-type': 'application/octet-stream' });
      stream.write(pattern(Number(q('after', '1000'))), () => {
        setTimeout(() => stream.destroy(new Error('abort')), 20);
      });
      return;
    case '/slow':
      setTimeout(() => {
        if (stream.destroyed) return;
        stream.respond({ ...base, ':status': 200 });
        stream.end('slow\n');
      }, Number(q('ms', '1000')));
      return;
    case '/push': {
      // Tries to push; the client disabled push, so Node refuses to send it.
      let pushError = '';
      try {
        stream.pushStream({ ':path': '/pushed' }, (err, push) => {
          if (err) return;
          push.respond({ ':status': 200 });
          push.end('pushed');
        });
      } catch (e) {
        pushError = e.code || String(e);
      }
      const body = JSON.stringify({ pushAllowed: stream.pushAllowed, enablePush: session.remoteSettings.enablePush, pushError });
      stream.respond({ ...base, ':status': 200, 'content-type': 'application/json' });
      stream.end(body);
      return;
    }
    case '/goaway':
      // GOAWAY(NO_ERROR) naming this stream the last one processed, sent while its
      // body is being written; the body then completes. Streams above it on this
      // session are not processed and must be sent again on a new connection.
      stream.respond({ ...base, ':status': 200, 'content-type': 'text/plain' });
      stream.write('before goaway\n');
      if (!session.fleetGoaway) {
        session.fleetGoaway = true;
        session.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
      }
      setTimeout(() => stream.end('after goaway\n'), Number(q('ms', '30')));
      return;
    default:
      stream.respond({ ...base, ':status': 404 });
      stream.end('not found\n');
  }
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
// The test closes stdin when it is done: exit then, so no server outlives it.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));

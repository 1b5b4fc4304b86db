// @stomp/stompjs (the STOMP client of browsers and Node) against nagare, for
// test_stomp_node.py. stompjs talks through a WebSocket-like object; nagare speaks plain
// TCP STOMP, so a small adapter hands the socket's bytes to stompjs unchanged (framing,
// escaping, heart-beats and acks are all stompjs's own code).
// Usage: node stompjs.mjs HOST PORT SCENARIO; prints "OK <scenario>".
import net from 'node:net';
import { Client } from '@stomp/stompjs';

const [host, port, scenario] = process.argv.slice(2);
const suffix = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);

class TcpWebSocket {
  constructor() {
    this.readyState = 0; // CONNECTING
    this.binaryType = 'arraybuffer';
    this.url = `tcp://${host}:${port}`;
    this.sock = net.connect(Number(port), host, () => {
      this.readyState = 1;
      this.onopen && this.onopen({});
    });
    this.sock.setNoDelay(true);
    this.sock.on('data', (b) => {
      const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
      this.onmessage && this.onmessage({ data: ab });
    });
    this.sock.on('close', () => {
      this.readyState = 3;
      this.onclose && this.onclose({ code: 1000, reason: '', wasClean: true });
    });
    this.sock.on('error', (e) => this.onerror && this.onerror(e));
  }
  send(data) {
    this.sock.write(typeof data === 'string' ? data : Buffer.from(data));
  }
  close() {
    this.readyState = 2;
    this.sock.end();
  }
  terminate() {
    this.sock.destroy();
  }
}

function fail(msg) {
  console.error('check failed:', msg);
  process.exit(1);
}
function check(ok, msg) {
  if (!ok) fail(msg);
}

function connect(extra = {}) {
  return new Promise((resolve, reject) => {
    const c = new Client({
      webSocketFactory: () => new TcpWebSocket(),
      connectHeaders: { host: '/' },
      reconnectDelay: 0,
      heartbeatIncoming: extra.heartbeat ?? 0,
      heartbeatOutgoing: extra.heartbeat ?? 0,
      debug: () => {},
    });
    c.onConnect = () => resolve(c);
    c.onStompError = (f) => reject(new Error(`ERROR ${f.headers.message} ${f.body}`));
    c.onWebSocketError = (e) => reject(e);
    c.activate();
  });
}

function collector() {
  const got = [];
  let waiters = [];
  const push = (m) => {
    got.push(m);
    waiters = waiters.filter((w) => !w());
  };
  const take = (n, ms = 10000) =>
    new Promise((resolve) => {
      const t = setTimeout(() => fail(`got ${got.length} of ${n} messages`), ms);
      const w = () => {
        if (got.length >= n) {
          clearTimeout(t);
          resolve(got.splice(0, n));
          return true;
        }
        return false;
      };
      if (!w()) waiters.push(w);
    });
  return { push, take };
}

function receipt(c, id) {
  return new Promise((resolve) => {
    const t = setTimeout(() => fail(`no RECEIPT ${id}`), 10000);
    c.watchForReceipt(id, () => {
      clearTimeout(t);
      resolve();
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  switch (scenario) {
    case 'pubsub': {
      const dest = `/topic/js-news-${suffix}`;
      const subs = [];
      for (let i = 0; i < 3; i++) {
        const c = await connect();
        const col = collector();
        const r = receipt(c, `s${i}`);
        c.subscribe(dest, col.push, { receipt: `s${i}` });
        await r;
        subs.push([c, col]);
      }
      const pub = await connect();
      for (let i = 0; i < 20; i++) pub.publish({ destination: dest, body: `m${i}`, headers: { seq: `${i}` } });
      for (const [c, col] of subs) {
        const got = await col.take(20);
        check(got.map((m) => m.body).join() === [...Array(20).keys()].map((i) => `m${i}`).join(), 'bodies');
        check(got.every((m, i) => m.headers.seq === `${i}`), 'seq headers');
        await c.deactivate();
      }
      await pub.deactivate();
      break;
    }
    case 'queue': {
      const dest = `/queue/js-work-${suffix}`;
      const pub = await connect();
      for (let i = 0; i < 5; i++) pub.publish({ destination: dest, body: `${i}` });
      const c = await connect();
      const col = collector();
      c.subscribe(dest, col.push, { ack: 'client-individual' });
      const got = await col.take(5);
      got[0].ack();
      got[1].ack();
      got[2].nack();
      const [back] = await col.take(1);
      check(back.body === '2' && back.headers.redelivered === 'true', `nack redelivery ${back.body}`);
      back.ack();
      await c.deactivate();
      const d = await connect();
      const col2 = collector();
      d.subscribe(dest, col2.push, { ack: 'auto' });
      const rest = await col2.take(2);
      check(rest.map((m) => m.body).join() === '3,4', `after disconnect ${rest.map((m) => m.body)}`);
      check(rest.every((m) => m.headers.redelivered === 'true'), 'redelivered flag');
      await d.deactivate();
      await pub.deactivate();
      break;
    }
    case 'tx': {
      const dest = `/queue/js-tx-${suffix}`;
      const c = await connect();
      const col = collector();
      c.subscribe(dest, col.push);
      let tx = c.begin();
      c.publish({ destination: dest, body: 'gone', headers: { transaction: tx.id } });
      tx.abort();
      tx = c.begin();
      c.publish({ destination: dest, body: 'kept', headers: { transaction: tx.id } });
      tx.commit();
      const [m] = await col.take(1);
      check(m.body === 'kept', `committed body ${m.body}`);
      await c.deactivate();
      break;
    }
    case 'rpc': {
      // RabbitMQ style: replies arrive without a SUBSCRIBE (stompjs: onUnhandledMessage).
      const service = `/queue/js-rpc-${suffix}`;
      const server = await connect();
      const r = receipt(server, 'rs');
      server.subscribe(
        service,
        (m) => server.publish({
          destination: m.headers['reply-to'],
          body: `${Number(m.body) + 1}`,
          headers: { 'correlation-id': m.headers['correlation-id'] },
        }),
        { 'prefetch-count': '100', receipt: 'rs' },
      );
      await r;
      const client = await connect();
      const col = collector();
      client.onUnhandledMessage = col.push;
      const n = 300;
      for (let i = 0; i < n; i++) {
        client.publish({ destination: service, body: `${i}`,
          headers: { 'reply-to': '/temp-queue/js', 'correlation-id': `${i}` } });
      }
      const got = await col.take(n, 20000);
      const seen = new Set();
      for (const m of got) {
        const corr = Number(m.headers['correlation-id']);
        check(Number(m.body) === corr + 1 && !seen.has(corr), `reply ${m.body} to ${corr}`);
        check(m.headers.subscription === '/temp-queue/js', 'subscription header');
        seen.add(corr);
      }
      await client.deactivate();
      await server.deactivate();
      break;
    }
    case 'binary': {
      const dest = `/queue/js-bin-${suffix}`;
      const c = await connect();
      const col = collector();
      c.subscribe(dest, col.push);
      const payload = new Uint8Array(70000).map((_, i) => i % 7);
      c.publish({ destination: dest, binaryBody: payload, headers: { 'content-type': 'application/octet-stream' } });
      const [m] = await col.take(1);
      check(Buffer.compare(Buffer.from(m.binaryBody), Buffer.from(payload)) === 0, 'binary body');
      await c.deactivate();
      break;
    }
    case 'heartbeat': {
      const c = await connect({ heartbeat: 200 });
      await sleep(1500);
      check(c.connected, 'still connected after heart-beats');
      const r = receipt(c, 'hb');
      c.publish({ destination: `/queue/js-hb-${suffix}`, body: 'x', headers: { receipt: 'hb' } });
      await r;
      await c.deactivate();
      break;
    }
    default:
      fail(`unknown scenario ${scenario}`);
  }
  console.log(`OK ${scenario}`);
  process.exit(0);
}

main().catch((e) => fail(e.stack || e));

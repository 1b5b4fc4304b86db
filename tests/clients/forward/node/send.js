// Sends events with @fluent-org/logger as a pytest test drives it:
//   node send.js HOST PORT TAG COUNT MODE [SHARED_KEY [HOSTNAME [USERNAME PASSWORD]]]
// With SEND_TLS_CA=FILE in the environment it connects over TLS trusting that CA.
// MODE: Message | Forward | PackedForward | CompressedPackedForward. Every emit asks for
// an ack; the script exits 0 only once every event is acknowledged. Event i is
// {"seq": i, "msg": "node event i"} at EventTime(1700000000+i, i*1000).
"use strict";
const fs = require("fs");
const { FluentClient, EventTime } = require("@fluent-org/logger");

async function main() {
  const [host, port, tag, countArg, mode, sharedKey, hostname, username, password] =
    process.argv.slice(2);
  const count = parseInt(countArg, 10);
  const options = {
    socket: { host, port: parseInt(port, 10), timeout: 10000, disableReconnect: true },
    eventMode: mode,
    ack: { ackTimeout: 10000 },
    flushInterval: 5,
  };
  if (process.env.SEND_TLS_CA) {
    options.socket.tls = { ca: fs.readFileSync(process.env.SEND_TLS_CA) };
  }
  // An empty SHARED_KEY still asks for the handshake (the key is then "").
  if (sharedKey !== undefined) {
    options.security = { clientHostname: hostname || "node-client", sharedKey };
    if (username) {
      options.security.username = username;
      options.security.password = password || "";
    }
  }
  const logger = new FluentClient(tag, options);
  await logger.connect();
  const emits = [];
  for (let i = 0; i < count; i++) {
    emits.push(
      logger.emit({ seq: i, msg: `node event ${i}` }, new EventTime(1700000000 + i, i * 1000))
    );
  }
  await Promise.all(emits);
  await logger.disconnect();
  console.log(`sent ${count}`);
}

// SEND_TIMEOUT_MS bounds the whole run (a refused handshake never acks anything).
const timer = setTimeout(() => {
  console.error("timed out");
  process.exit(3);
}, parseInt(process.env.SEND_TIMEOUT_MS || "25000", 10));
main().then(
  () => {
    clearTimeout(timer);
    process.exit(0);
  },
  (err) => {
    console.error("failed:", err && (err.stack || err));
    process.exit(1);
  }
);

//! The receiver over real sockets against a real broker in a temporary directory:
//! acks after the append, records as stored, routing, handshake, heartbeats and the
//! connection being closed on garbage while others go on.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nagare_core::groups::GroupConfig;
use nagare_core::log::batch::{split_batches, Record};
use nagare_core::security::SecurityConfig;
use nagare_core::{Broker, BrokerConfig, Partition, Subsystems};
use nagare_forward::auth::digest;
use nagare_forward::{Config, Format, Route};
use nagare_listener::{ConnectionLimits, ListenerOptions};
use rmpv::Value as V;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

struct Server {
    addr: std::net::SocketAddr,
    broker: Arc<Broker>,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn start(config: Config) -> Server {
    start_with(config, false).await
}

/// `auth_required`: the listener demands authentication, and nothing is allowed without
/// an ACL (the broker's default then).
async fn start_with(config: Config, auth_required: bool) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = watch::channel(false);
    let security = SecurityConfig {
        auth_required,
        ..SecurityConfig::default()
    };
    let (core, tasks) = Subsystems::open(&broker, GroupConfig::default(), security).unwrap();
    tasks.spawn();
    let state = nagare_forward::state(broker.clone(), config, core.security.clone()).unwrap();
    nagare_forward::start_udp_heartbeats(addr, &state, rx.clone()).await;
    let options = ListenerOptions {
        name: "forward",
        protocol: "forward",
        registry: nagare_listener::ConnectionRegistry::new(),
        limits: ConnectionLimits::new(0, 0),
        grace: Duration::from_secs(1),
        auth_required,
        tls: None,
        idle_timeout: None,
    };
    tokio::spawn(nagare_listener::run(
        listener,
        options,
        move |conn| nagare_forward::handle(conn, state.clone()),
        rx,
    ));
    Server {
        addr,
        broker,
        _stop: stop,
        _dir: dir,
    }
}

fn pack(v: &V) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).unwrap();
    out
}

fn records(b: &Broker, topic: &str) -> Vec<Record> {
    let Some(t) = b.topic(topic) else {
        return Vec::new();
    };
    let p = t.partition(0).unwrap();
    let read = p.records_from(0, u64::MAX >> 1).unwrap();
    assert_eq!(read.next_offset, p.log_end_offset());
    read.records
}

/// The stored record batches of a partition, whole.
fn batches(p: &Partition) -> Vec<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    for s in p.read(0, u64::MAX >> 1).unwrap().slices {
        let mut buf = vec![0u8; s.len as usize];
        s.file.read_exact_at(&mut buf, s.position).unwrap();
        let buf = Bytes::from(buf);
        for r in split_batches(&buf).unwrap() {
            out.push(buf.slice(r));
        }
    }
    out
}

fn header<'a>(r: &'a Record, name: &str) -> &'a [u8] {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_deref())
        .unwrap()
}

async fn read_value(s: &mut TcpStream) -> V {
    read_values(s, 1).await.remove(0)
}

/// Reads `n` MessagePack values (replies may arrive together in one segment).
async fn read_values(s: &mut TcpStream, n: usize) -> Vec<V> {
    let mut buf = Vec::new();
    loop {
        let mut rd = &buf[..];
        let mut got = Vec::new();
        while let Ok(v) = rmpv::decode::read_value(&mut rd) {
            got.push(v);
        }
        if got.len() >= n {
            return got;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk))
            .await
            .expect("reply within 5 s")
            .unwrap();
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

fn event_time(secs: u32, nanos: u32) -> V {
    let mut b = secs.to_be_bytes().to_vec();
    b.extend_from_slice(&nanos.to_be_bytes());
    V::Ext(0, b)
}

fn rec(i: i64) -> V {
    V::Map(vec![
        (V::from("seq"), V::from(i)),
        (V::from("msg"), V::from(format!("hello {i}"))),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_forward_chunk_is_one_batch_acked_after_append() {
    let srv = start(Config::default()).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let entries: Vec<u8> = (0..100)
        .flat_map(|i| {
            pack(&V::Array(vec![
                event_time(1_700_000_000 + i, 1000 * i),
                rec(i as i64),
            ]))
        })
        .collect();
    let chunk = V::from("MTIzNDU2Nzg5MAo=\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&entries).unwrap();
    let frames = [
        pack(&V::Array(vec![
            V::from("app.web"),
            V::Binary(entries.clone()),
            V::Map(vec![(V::from("chunk"), chunk.clone())]),
        ])),
        pack(&V::Array(vec![
            V::from("app.web"),
            V::Binary(gz.finish().unwrap()),
            V::Map(vec![
                (V::from("chunk"), V::from("second")),
                (V::from("compressed"), V::from("gzip")),
            ]),
        ])),
    ];
    // Both pipelined in one write.
    s.write_all(&frames.concat()).await.unwrap();
    let acks = read_values(&mut s, 2).await;
    assert_eq!(acks[0], V::Map(vec![(V::from("ack"), chunk)]));
    assert_eq!(acks[1]["ack"].as_str(), Some("second"));

    let recs = records(&srv.broker, "app.web");
    assert_eq!(recs.len(), 200);
    let log = srv.broker.topic("app.web").unwrap().partition(0).unwrap();
    let batches = batches(&log);
    assert_eq!(batches.len(), 2, "one batch per chunk");
    for (i, r) in recs.iter().take(100).enumerate() {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"seq": i, "msg": format!("hello {i}")})
        );
        assert_eq!(r.timestamp, (1_700_000_000 + i as i64) * 1000);
        assert_eq!(header(r, "fluent.tag"), b"app.web");
        let ns = (1_700_000_000 + i as i128) * 1_000_000_000 + 1000 * i as i128;
        assert_eq!(header(r, "fluent.time_ns"), ns.to_string().as_bytes());
        assert_eq!(r.offset, i as i64);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_pick_topic_format_and_drop() {
    let config = Config {
        routes: vec![
            Route {
                pattern: "app.**".into(),
                topic: "app-logs".into(),
                ..Route::default()
            },
            Route {
                pattern: "raw.*".into(),
                topic: "raw".into(),
                format: Format::Msgpack,
                drop: false,
            },
            Route {
                pattern: "noise.**".into(),
                drop: true,
                ..Route::default()
            },
        ],
        ..Config::default()
    };
    let srv = start(config).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let send = |tag: &str, chunk: &str| {
        pack(&V::Array(vec![
            V::from(tag),
            V::from(5),
            rec(1),
            V::Map(vec![(V::from("chunk"), V::from(chunk))]),
        ]))
    };
    for (tag, chunk) in [
        ("app.a.b", "1"),
        ("raw.x", "2"),
        ("noise.y", "3"),
        ("web/a b", "4"),
    ] {
        s.write_all(&send(tag, chunk)).await.unwrap();
        assert_eq!(read_value(&mut s).await["ack"].as_str(), Some(chunk));
    }
    assert_eq!(records(&srv.broker, "app-logs").len(), 1);
    let raw = records(&srv.broker, "raw");
    assert_eq!(raw[0].value.as_deref().unwrap(), &pack(&rec(1))[..]);
    assert!(srv.broker.topic("noise.y").is_none());
    assert_eq!(records(&srv.broker, "web_a_b").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_only_its_own_connection() {
    let srv = start(Config::default()).await;
    let mut good = TcpStream::connect(srv.addr).await.unwrap();
    let mut bad = TcpStream::connect(srv.addr).await.unwrap();
    bad.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert!(closed(&mut bad).await);
    // A nil heartbeat is ignored; the connection carries on.
    good.write_all(&[0xc0]).await.unwrap();
    good.write_all(&pack(&V::Array(vec![
        V::from("ok"),
        V::from(1),
        rec(1),
        V::Map(vec![(V::from("chunk"), V::from("c"))]),
    ])))
    .await
    .unwrap();
    assert_eq!(read_value(&mut good).await["ack"].as_str(), Some("c"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_with_shared_key_and_user() {
    let config = Config {
        shared_key: "s3cret".into(),
        self_hostname: "srv".into(),
        users: vec![nagare_forward::User {
            username: "alice".into(),
            password: "pw".into(),
        }],
        ..Config::default()
    };
    let srv = start(config).await;
    for (key, pw, ok) in [
        ("s3cret", "pw", true),
        ("wrong", "pw", false),
        ("s3cret", "bad", false),
    ] {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        let helo = read_value(&mut s).await;
        assert_eq!(helo[0].as_str(), Some("HELO"));
        let nonce = helo[1]["nonce"].as_str().unwrap().to_string();
        let auth = helo[1]["auth"].as_str().unwrap().to_string();
        let ping = V::Array(vec![
            V::from("PING"),
            V::from("client"),
            V::from("salt"),
            V::from(digest(&[
                b"salt",
                b"client",
                nonce.as_bytes(),
                key.as_bytes(),
            ])),
            V::from("alice"),
            V::from(digest(&[auth.as_bytes(), b"alice", pw.as_bytes()])),
        ]);
        s.write_all(&pack(&ping)).await.unwrap();
        let pong = read_value(&mut s).await;
        assert_eq!(pong[0].as_str(), Some("PONG"));
        assert_eq!(pong[1].as_bool(), Some(ok));
        if ok {
            let want = digest(&[b"salt", b"srv", nonce.as_bytes(), b"s3cret"]);
            assert_eq!(pong[4].as_str(), Some(want.as_str()));
            s.write_all(&pack(&V::Array(vec![
                V::from("authed"),
                V::from(1),
                rec(1),
                V::Map(vec![(V::from("chunk"), V::from("a"))]),
            ])))
            .await
            .unwrap();
            assert_eq!(read_value(&mut s).await["ack"].as_str(), Some("a"));
        } else {
            assert!(!pong[2].as_str().unwrap().is_empty());
            assert!(closed(&mut s).await);
        }
    }
    // Events before the handshake are refused.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let _helo = read_value(&mut s).await;
    s.write_all(&pack(&V::Array(vec![V::from("x"), V::from(1), rec(1)])))
        .await
        .unwrap();
    assert!(closed(&mut s).await);
    assert!(srv.broker.topic("x").is_none());
}

/// HELO, then a PING as `user` with `password` and shared key `key`; the PONG.
async fn login(s: &mut TcpStream, key: &str, user: &str, password: &str) -> V {
    let helo = read_value(s).await;
    assert_eq!(helo[0].as_str(), Some("HELO"));
    let nonce = helo[1]["nonce"].as_str().unwrap().to_string();
    let auth = helo[1]["auth"].as_str().unwrap().to_string();
    assert!(!auth.is_empty(), "HELO asks for a user");
    let ping = V::Array(vec![
        V::from("PING"),
        V::from("client"),
        V::from("salt"),
        V::from(digest(&[
            b"salt",
            b"client",
            nonce.as_bytes(),
            key.as_bytes(),
        ])),
        V::from(user),
        V::from(digest(&[
            auth.as_bytes(),
            user.as_bytes(),
            password.as_bytes(),
        ])),
    ]);
    s.write_all(&pack(&ping)).await.unwrap();
    read_value(s).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_required_makes_the_handshake_mandatory_without_a_shared_key() {
    let config = Config {
        users: vec![nagare_forward::User {
            username: "alice".into(),
            password: "pw".into(),
        }],
        ..Config::default()
    };
    let srv = start_with(config, true).await;
    // No shared key configured: it is the empty string in the digests.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let pong = login(&mut s, "", "alice", "pw").await;
    assert_eq!(pong[1].as_bool(), Some(true), "{pong:?}");
    // Authenticated, but no ACL allows alice to write: no ack, and the connection closes.
    s.write_all(&pack(&V::Array(vec![
        V::from("denied"),
        V::from(1),
        rec(1),
        V::Map(vec![(V::from("chunk"), V::from("d"))]),
    ])))
    .await
    .unwrap();
    assert!(closed(&mut s).await);
    assert!(records(&srv.broker, "denied").is_empty());
    for (user, password) in [("alice", "bad"), ("mallory", "pw"), ("", "")] {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        let pong = login(&mut s, "", user, password).await;
        assert_eq!(pong[1].as_bool(), Some(false));
        assert_eq!(pong[2].as_str(), Some("username/password mismatch"));
        assert!(closed(&mut s).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_heartbeat_is_answered() {
    let srv = start(Config::default()).await;
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // UDP is lossy and the heartbeat socket may be bound a moment after the TCP one:
    // resend like Fluentd's heartbeat does, until an answer or the deadline.
    let mut b = [9u8; 8];
    let answered = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            sock.send_to(&[0u8], srv.addr).await.unwrap();
            if let Ok(got) =
                tokio::time::timeout(Duration::from_millis(200), sock.recv_from(&mut b)).await
            {
                return got.unwrap().0;
            }
        }
    })
    .await;
    let n = answered.expect("no heartbeat answer within 5 s");
    assert_eq!(&b[..n], &[0u8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_larger_than_max_message_bytes_is_split_and_acked_once() {
    let srv = start(Config::default()).await;
    let topic_config = nagare_core::TopicConfig {
        max_message_bytes: 10_000,
        ..nagare_core::TopicConfig::default()
    };
    srv.broker
        .create_topic("small", Some(1), topic_config)
        .unwrap();
    let entries: Vec<u8> = (0..1000)
        .flat_map(|i| pack(&V::Array(vec![V::from(1_700_000_000 + i), rec(i as i64)])))
        .collect();
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(&pack(&V::Array(vec![
        V::from("small"),
        V::Binary(entries),
        V::Map(vec![(V::from("chunk"), V::from("big"))]),
    ])))
    .await
    .unwrap();
    assert_eq!(read_value(&mut s).await["ack"].as_str(), Some("big"));
    let p = srv.broker.partition("small", 0).unwrap();
    let batches = batches(&p);
    assert!(batches.len() > 5, "{} batches", batches.len());
    assert!(batches.iter().all(|b| b.len() <= 10_000));
    let recs = records(&srv.broker, "small");
    assert_eq!(recs.len(), 1000);
    assert!(recs.iter().enumerate().all(|(i, r)| r.offset == i as i64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_garbage_are_still_acked() {
    let srv = start(Config::default()).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let mut bytes = pack(&V::Array(vec![
        V::from("before"),
        V::from(1),
        rec(1),
        V::Map(vec![(V::from("chunk"), V::from("first"))]),
    ]));
    bytes.extend_from_slice(b"\xc1garbage");
    s.write_all(&bytes).await.unwrap();
    assert_eq!(read_value(&mut s).await["ack"].as_str(), Some("first"));
    assert!(closed(&mut s).await);
    assert_eq!(records(&srv.broker, "before").len(), 1);
}

/// Sends `[tag, [[t, r]...], {chunk}]` with a small event, one larger than the topic's
/// `max.message.bytes` (10,000) and another small one; returns the ack.
async fn send_with_big_event(srv: &Server, tag: &str) -> V {
    let topic_config = nagare_core::TopicConfig {
        max_message_bytes: 10_000,
        ..nagare_core::TopicConfig::default()
    };
    srv.broker.create_topic(tag, Some(1), topic_config).unwrap();
    let big = V::Map(vec![(V::from("blob"), V::from("x".repeat(20_000)))]);
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(&pack(&V::Array(vec![
        V::from(tag),
        V::Array(vec![
            V::Array(vec![event_time(1_700_000_000, 1), rec(0)]),
            V::Array(vec![event_time(1_700_000_001, 2), big]),
            V::Array(vec![event_time(1_700_000_002, 3), rec(2)]),
        ]),
        V::Map(vec![(V::from("chunk"), V::from("c1"))]),
    ])))
    .await
    .unwrap();
    read_value(&mut s).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_beyond_max_message_bytes_goes_to_the_dead_letter_topic() {
    let srv = start(Config::default()).await;
    let ack = send_with_big_event(&srv, "small").await;
    assert_eq!(ack["ack"].as_str(), Some("c1"));
    let stored = records(&srv.broker, "small");
    assert_eq!(stored.len(), 2);
    assert!(std::str::from_utf8(stored[1].value.as_deref().unwrap())
        .unwrap()
        .contains("\"seq\":2"));
    let dead = records(&srv.broker, "forward.dead-letter");
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(header(d, "fluent.tag"), b"small");
    assert_eq!(header(d, "fluent.time_ns"), b"1700000001000000002");
    assert_eq!(header(d, "dead_letter.reason"), b"record_too_large");
    assert_eq!(header(d, "dead_letter.topic"), b"small");
    let error = String::from_utf8(header(d, "dead_letter.error").to_vec()).unwrap();
    assert!(error.contains("max.message.bytes 10000"), "{error}");
    // The record as sent (MessagePack), whole: it fits the dead-letter topic's limit.
    let value = rmpv::decode::read_value(&mut d.value.as_deref().unwrap()).unwrap();
    assert_eq!(value["blob"].as_str().map(str::len), Some(20_000));
    assert!(d.headers.iter().all(|(k, _)| k != "dead_letter.truncated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dead_letter_topic_refused_events_are_acked_and_counted_only() {
    let srv = start(Config {
        dead_letter_topic: String::new(),
        ..Config::default()
    })
    .await;
    let ack = send_with_big_event(&srv, "nodl").await;
    assert_eq!(ack["ack"].as_str(), Some("c1"));
    assert_eq!(records(&srv.broker, "nodl").len(), 2);
    assert!(srv.broker.topic("forward.dead-letter").is_none());
}

/// Chunks sent back to back without waiting land in rounds that overlap (one appended
/// while the one before waits for its fsync): every ack still comes, once each, in order,
/// and every event is stored in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_chunks_are_acked_in_order_across_rounds() {
    let srv = start(Config::default()).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    const CHUNKS: i64 = 60;
    const EVENTS: i64 = 50;
    let frames: Vec<Vec<u8>> = (0..CHUNKS)
        .map(|c| {
            let entries: Vec<u8> = (0..EVENTS)
                .flat_map(|i| {
                    pack(&V::Array(vec![
                        event_time(1_700_000_000, 0),
                        rec(c * EVENTS + i),
                    ]))
                })
                .collect();
            pack(&V::Array(vec![
                V::from("pipe"),
                V::Binary(entries),
                V::Map(vec![(V::from("chunk"), V::from(format!("c{c}")))]),
            ]))
        })
        .collect();
    // In several writes with pauses, so the chunks arrive over many reads and rounds.
    for group in frames.chunks(7) {
        s.write_all(&group.concat()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let acks = read_values(&mut s, CHUNKS as usize).await;
    assert_eq!(acks.len(), CHUNKS as usize);
    for (c, ack) in acks.iter().enumerate() {
        assert_eq!(ack["ack"].as_str(), Some(format!("c{c}").as_str()));
    }
    let recs = records(&srv.broker, "pipe");
    assert_eq!(recs.len(), (CHUNKS * EVENTS) as usize);
    for (i, r) in recs.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert_eq!(v["seq"], i);
    }
}

/// `idle_timeout_ms` closes a connection that stays silent after its acks, and not one
/// that is waiting for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_is_closed_after_its_acks() {
    let srv = start(Config {
        idle_timeout_ms: 300,
        ..Config::default()
    })
    .await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let msg = pack(&V::Array(vec![
        V::from("idle"),
        event_time(1_700_000_000, 0),
        rec(1),
        V::Map(vec![(V::from("chunk"), V::from("only"))]),
    ]));
    s.write_all(&msg).await.unwrap();
    assert_eq!(read_value(&mut s).await["ack"].as_str(), Some("only"));
    assert!(closed(&mut s).await, "closed once idle");
    assert_eq!(records(&srv.broker, "idle").len(), 1);
}

//! Dispatch against a real broker on a temp dir. The session's outbound side is a fake
//! sink: the connection's writer writes into one end of a loopback socket and the test
//! reads the other end, decoding and collecting every frame the session sent.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use nagare_core::groups::GroupConfig;
use nagare_core::security::{Principal, SecurityConfig};
use nagare_core::{Broker, BrokerConfig, Subsystems};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use super::run_frames;
use crate::access::Access;
use crate::config::Config;
use crate::decode::Decoder;
use crate::frame::{Command, Frame, Version};
use crate::session::{Session, Shared};
use crate::writer;

/// Collects what the session sends.
struct Sink {
    peer: TcpStream,
    decoder: Decoder,
    buf: BytesMut,
}

impl Sink {
    /// The next frame the session sent (the test fails after 10 s without one).
    async fn next(&mut self) -> Frame {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).expect("valid frame") {
                return f;
            }
            let read = tokio::time::timeout_at(deadline, self.peer.read_buf(&mut self.buf))
                .await
                .expect("a frame within 10 s")
                .expect("read");
            assert!(read > 0, "connection closed");
        }
    }

    async fn expect(&mut self, command: Command, headers: &[(&str, &str)]) -> Frame {
        let f = self.next().await;
        assert_eq!(f.command, command, "{f:?}");
        for (k, v) in headers {
            assert_eq!(f.header(k), Some(*v), "{k} of {f:?}");
        }
        f
    }
}

struct Harness {
    session: Session,
    sink: Sink,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn new() -> Harness {
        Harness::with(SecurityConfig::default(), Config::default()).await
    }

    /// A session on a listener that demands authentication, nothing allowed without an ACL.
    async fn secured(config: Config) -> Harness {
        let security = SecurityConfig {
            auth_required: true,
            ..SecurityConfig::default()
        };
        Harness::with(security, config).await
    }

    async fn with(security: SecurityConfig, config: Config) -> Harness {
        let required = security.auth_required;
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        })
        .expect("broker");
        let (core, background) =
            Subsystems::open(&broker, GroupConfig::default(), security).expect("subsystems");
        background.spawn();
        let limits = config.limits();
        let access = Access::new(
            core.security.clone(),
            [127, 0, 0, 1].into(),
            Principal::Anonymous,
            required,
        );
        let shared = Arc::new(Shared {
            broker,
            security: core.security.clone(),
            outbound: writer::GlobalBudget::new(config.max_outbound_bytes),
            config,
            queues: core.queues.clone(),
            temp: Default::default(),
            next_conn: AtomicU64::new(1),
            next_message: AtomicU64::new(1),
            replies: None,
            temp_prefix: String::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let peer = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let (_, wr) = nagare_listener::Stream::from_tcp(server).into_split();
        let (out, _dead, _heartbeat) = writer::spawn(
            1,
            wr,
            nagare_listener::ConnectionInfo::standalone("stomp", ([127, 0, 0, 1], 1).into()),
            1 << 20,
            writer::GlobalBudget::new(1 << 20),
        );
        let mut decoder = Decoder::new(limits);
        decoder.version = Version::V1_2;
        Harness {
            session: Session::new(shared, out, access),
            sink: Sink {
                peer,
                decoder,
                buf: BytesMut::new(),
            },
            _dir: dir,
        }
    }

    async fn run(&mut self, frames: Vec<Frame>) -> bool {
        let mut frames = frames;
        run_frames(&mut self.session, &mut frames).await
    }

    async fn connect(&mut self) {
        let connect = Frame::new(Command::Connect).with_header("accept-version", "1.0,1.2");
        assert!(self.run(vec![connect]).await);
        self.sink
            .expect(Command::Connected, &[("version", "1.2")])
            .await;
    }
}

fn frame(command: Command, headers: &[(&str, &str)]) -> Frame {
    headers
        .iter()
        .fold(Frame::new(command), |f, (k, v)| f.with_header(*k, *v))
}

#[tokio::test]
async fn frames_before_connect_are_refused_with_their_receipt() {
    let mut h = Harness::new().await;
    let send = frame(
        Command::Send,
        &[("destination", "/queue/q"), ("receipt", "r1")],
    );
    assert!(!h.run(vec![send]).await);
    h.sink
        .expect(
            Command::Error,
            &[("message", "SEND before CONNECT"), ("receipt-id", "r1")],
        )
        .await;
    assert!(!h.session.connected());
}

#[tokio::test]
async fn every_command_is_answered_in_order_and_transactions_wait_for_commit() {
    let mut h = Harness::new().await;
    h.connect().await;
    assert_eq!(h.session.version(), Version::V1_2);
    assert_eq!(h.session.heartbeat(), (0, 0));
    let ok = h
        .run(vec![
            frame(
                Command::Subscribe,
                &[
                    ("destination", "/temp-queue/a"),
                    ("id", "s"),
                    ("receipt", "sub"),
                ],
            ),
            frame(
                Command::Begin,
                &[("transaction", "t"), ("receipt", "begin")],
            ),
            frame(
                Command::Send,
                &[
                    ("destination", "/temp-queue/a"),
                    ("transaction", "t"),
                    ("receipt", "held"),
                    ("x", "1"),
                ],
            )
            .with_body(&b"in tx"[..]),
            frame(
                Command::Commit,
                &[("transaction", "t"), ("receipt", "commit")],
            ),
            frame(
                Command::Send,
                &[("destination", "/topic/t"), ("receipt", "log1")],
            ),
            frame(
                Command::Send,
                &[("destination", "/topic/t"), ("receipt", "log2")],
            ),
            frame(Command::Unsubscribe, &[("id", "s"), ("receipt", "unsub")]),
            frame(Command::Disconnect, &[("receipt", "bye")]),
        ])
        .await;
    assert!(ok);
    let s = &mut h.sink;
    s.expect(Command::Receipt, &[("receipt-id", "sub")]).await;
    s.expect(Command::Receipt, &[("receipt-id", "begin")]).await;
    // A held SEND is answered at once but delivered only by COMMIT.
    s.expect(Command::Receipt, &[("receipt-id", "held")]).await;
    let m = s
        .expect(
            Command::Message,
            &[
                ("destination", "/temp-queue/a"),
                ("subscription", "s"),
                ("x", "1"),
            ],
        )
        .await;
    assert_eq!(&m.body[..], b"in tx");
    s.expect(Command::Receipt, &[("receipt-id", "commit")])
        .await;
    // Both SENDs to the topic are one append; their receipts follow it, in order.
    s.expect(Command::Receipt, &[("receipt-id", "log1")]).await;
    s.expect(Command::Receipt, &[("receipt-id", "log2")]).await;
    s.expect(Command::Receipt, &[("receipt-id", "unsub")]).await;
    s.expect(Command::Receipt, &[("receipt-id", "bye")]).await;
    assert!(h.session.closing());
}

#[tokio::test]
async fn an_invalid_command_gets_error_with_receipt_after_earlier_appends() {
    let mut h = Harness::new().await;
    h.connect().await;
    let ok = h
        .run(vec![
            frame(
                Command::Send,
                &[("destination", "/topic/t"), ("receipt", "first")],
            ),
            // 1.2 requires `id` on ACK.
            frame(Command::Ack, &[("message-id", "m"), ("receipt", "bad")]),
            frame(Command::Disconnect, &[("receipt", "never")]),
        ])
        .await;
    assert!(!ok);
    h.sink
        .expect(Command::Receipt, &[("receipt-id", "first")])
        .await;
    h.sink
        .expect(
            Command::Error,
            &[
                ("message", "ACK frame without the required 'id' header"),
                ("receipt-id", "bad"),
            ],
        )
        .await;
    assert!(!h.session.closing());
}

#[tokio::test]
async fn session_state_errors_are_refused() {
    for (frames, message) in [
        (
            vec![frame(
                Command::Send,
                &[("destination", "/queue/q"), ("transaction", "nope")],
            )],
            "unknown transaction \"nope\"",
        ),
        (
            vec![
                frame(Command::Begin, &[("transaction", "t")]),
                frame(Command::Begin, &[("transaction", "t")]),
            ],
            "transaction \"t\" is already open",
        ),
        (
            vec![frame(Command::Abort, &[("transaction", "t")])],
            "unknown transaction \"t\"",
        ),
        (
            vec![frame(Command::Unsubscribe, &[("id", "s")])],
            "no subscription with id \"s\"",
        ),
        (
            vec![
                frame(
                    Command::Subscribe,
                    &[("destination", "/topic/t"), ("id", "s")],
                ),
                frame(
                    Command::Subscribe,
                    &[("destination", "/topic/u"), ("id", "s")],
                ),
            ],
            "subscription id \"s\" is already in use on this connection",
        ),
        (vec![frame(Command::Connect, &[])], "already connected"),
        (
            vec![frame(Command::Message, &[])],
            "MESSAGE is a server frame",
        ),
    ] {
        let mut h = Harness::new().await;
        h.connect().await;
        assert!(!h.run(frames).await, "{message}");
        h.sink.expect(Command::Error, &[("message", message)]).await;
    }
}

#[tokio::test]
async fn a_listener_demanding_authentication_refuses_connect_without_valid_credentials() {
    let config = Config {
        login: "guest".into(),
        passcode: "pw".into(),
        ..Config::default()
    };
    for extra in [
        vec![],
        vec![("login", ""), ("passcode", "")],
        vec![("login", "guest"), ("passcode", "wrong")],
        vec![("login", "nobody"), ("passcode", "pw")],
    ] {
        let mut h = Harness::secured(config.clone()).await;
        let mut headers = vec![("accept-version", "1.2"), ("receipt", "r")];
        headers.extend(extra.iter().copied());
        assert!(!h.run(vec![frame(Command::Connect, &headers)]).await);
        let error = h
            .sink
            .expect(
                Command::Error,
                &[("message", "Authentication failed: bad login or passcode")],
            )
            .await;
        assert!(!h.session.connected(), "{extra:?} {error:?}");
    }
    let mut h = Harness::secured(config).await;
    let ok = frame(
        Command::Connect,
        &[
            ("accept-version", "1.2"),
            ("login", "guest"),
            ("passcode", "pw"),
        ],
    );
    assert!(h.run(vec![ok]).await);
    h.sink.expect(Command::Connected, &[]).await;
}

#[tokio::test]
async fn a_denied_send_or_subscribe_gets_an_error_naming_destination_and_operation() {
    // Authentication required and no ACL: nothing on the log is allowed, temp queues are.
    let config = Config {
        login: "guest".into(),
        passcode: "pw".into(),
        ..Config::default()
    };
    let connect = || {
        frame(
            Command::Connect,
            &[
                ("accept-version", "1.2"),
                ("login", "guest"),
                ("passcode", "pw"),
            ],
        )
    };
    for (denied, message) in [
        (
            frame(
                Command::Send,
                &[("destination", "/topic/t"), ("receipt", "r")],
            ),
            "Access refused: User:guest is not authorized to Write topic t (destination /topic/t)",
        ),
        (
            frame(
                Command::Subscribe,
                &[("destination", "/queue/q"), ("id", "1"), ("receipt", "r")],
            ),
            "Access refused: User:guest is not authorized to Read topic queue.q (destination /queue/q)",
        ),
    ] {
        let mut h = Harness::secured(config.clone()).await;
        assert!(h.run(vec![connect()]).await);
        h.sink.expect(Command::Connected, &[]).await;
        let temp = frame(
            Command::Send,
            &[("destination", "/temp-queue/mine"), ("receipt", "t")],
        );
        assert!(h.run(vec![temp]).await);
        h.sink.expect(Command::Message, &[]).await;
        h.sink.expect(Command::Receipt, &[("receipt-id", "t")]).await;
        assert!(!h.run(vec![denied]).await);
        h.sink
            .expect(Command::Error, &[("message", message), ("receipt-id", "r")])
            .await;
    }
}

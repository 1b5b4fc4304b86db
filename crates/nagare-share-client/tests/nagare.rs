//! The share consumer against nagare's own share groups (which are tested against
//! Kafka's Java `KafkaShareConsumer`), started in this process on 127.0.0.1 the way
//! `nagare serve` starts its Kafka listener.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nagare_core::groups::GroupConfig;
use nagare_core::security::SecurityConfig;
use nagare_core::{Broker, BrokerConfig, Subsystems, TopicConfig};
use nagare_listener::{ConnectionLimits, ConnectionRegistry, ListenerOptions, TlsContext};
use nagare_share_client::{
    share_groups_supported, AckKind, ShareClientConfig, ShareConsumer, ShareError,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A nagare broker with its Kafka listener.
struct Nagare {
    addr: String,
    broker: Arc<Broker>,
    core: Subsystems,
    stop: watch::Sender<bool>,
    listener: JoinHandle<std::io::Result<()>>,
}

#[derive(Default, Clone)]
struct Options {
    tls: Option<Arc<TlsContext>>,
    /// Users (name, password), the first a super user; logins required.
    users: Vec<(&'static str, &'static str)>,
    /// Bind this address (a restart keeps its port).
    addr: Option<String>,
}

impl Nagare {
    async fn start(dir: &Path, options: Options) -> Nagare {
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let auth = !options.users.is_empty();
        let security = SecurityConfig {
            auth_required: auth,
            super_users: options
                .users
                .iter()
                .take(1)
                .map(|(u, _)| u.to_string())
                .collect(),
            ..SecurityConfig::default()
        };
        let b = broker.clone();
        let (core, tasks) = tokio::task::spawn_blocking(move || {
            Subsystems::open(&b, GroupConfig::default(), security)
        })
        .await
        .unwrap()
        .unwrap();
        tasks.spawn();
        for (user, password) in &options.users {
            core.security
                .users
                .add(user, password, false)
                .await
                .unwrap();
        }
        let bind = options.addr.clone().unwrap_or_else(|| "127.0.0.1:0".into());
        let tcp = TcpListener::bind(&bind).await.unwrap();
        let addr = tcp.local_addr().unwrap().to_string();
        let state = Arc::new(nagare_kafka::KafkaState::new(
            broker.clone(),
            &core,
            nagare_kafka::Config::default(),
            &tcp,
        ));
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::spawn(nagare_listener::run(
            tcp,
            ListenerOptions {
                name: "kafka",
                protocol: "kafka",
                registry: ConnectionRegistry::new(),
                limits: ConnectionLimits::new(0, 0),
                grace: Duration::from_millis(100),
                auth_required: auth,
                tls: options.tls.clone(),
                idle_timeout: None,
            },
            move |conn| nagare_kafka::handle(conn, state.clone()),
            stopped,
        ));
        Nagare {
            addr,
            broker,
            core,
            stop,
            listener,
        }
    }

    fn topic(&self, name: &str, partitions: u32) {
        self.broker
            .create_topic(name, Some(partitions), TopicConfig::default())
            .unwrap();
    }

    /// Stops the listener (its connections end), writes the queue state and closes the
    /// broker, as `nagare serve` does on SIGTERM.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.listener.await;
        self.core.queues.flush().await.unwrap();
        let b = self.broker.clone();
        tokio::task::spawn_blocking(move || b.shutdown())
            .await
            .unwrap()
            .unwrap();
    }
}

async fn nagare() -> (tempfile::TempDir, Nagare) {
    let dir = tempfile::tempdir().unwrap();
    let n = Nagare::start(dir.path(), Options::default()).await;
    (dir, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_groups_are_offered() {
    let (_dir, n) = nagare().await;
    assert!(share_groups_supported(&config(&n.addr)).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_share_a_thousand_records() {
    let (_dir, n) = nagare().await;
    n.topic("shared", 3);
    two_members_share(&n.addr, "shared", 3, "g-shared").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_redelivers_with_a_higher_count() {
    let (_dir, n) = nagare().await;
    n.topic("rel", 1);
    release_redelivers(&n.addr, "rel", "g-rel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_archives() {
    let (_dir, n) = nagare().await;
    n.topic("rej", 1);
    common::reject_archives(&n.addr, "rej", "g-rej").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_hands_back_what_was_held() {
    let (_dir, n) = nagare().await;
    n.topic("held", 1);
    close_hands_back(&n.addr, "held", "g-held").await;
}

/// An ACCEPT survives the member closing and the broker restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accept_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let n = Nagare::start(dir.path(), Options::default()).await;
    n.topic("keep", 1);
    let addr = n.addr.clone();
    let path = dir.path().to_path_buf();
    let mut holder = None;
    accept_survives(&addr, "keep", "g-keep", || async {
        n.stop().await;
        let again = Nagare::start(&path, Options::default()).await;
        let addr = again.addr.clone();
        holder = Some(again);
        addr
    })
    .await;
}

/// The broker goes away: poll says so within the request timeout; it comes back on the
/// same port: the consumer carries on by itself (rejoining, new share session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_is_reported_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let n = Nagare::start(dir.path(), Options::default()).await;
    n.topic("away", 1);
    let addr = n.addr.clone();
    earliest(&addr, "g-away").await;
    produce(&addr, "away", 0, &values("before", 1), 1).await;
    let mut cfg = config(&addr);
    cfg.request_timeout = Duration::from_secs(2);
    let c = ShareConsumer::join(cfg, "g-away", vec!["away".into()])
        .await
        .unwrap();
    let got = poll_n(&c, 1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1);
    c.acknowledge("away", 0, got[0].offset, AckKind::Accept);
    c.flush().await.unwrap();
    n.stop().await;
    unreachable_promptly(&c, Duration::from_secs(2)).await;
    let again = Nagare::start(
        dir.path(),
        Options {
            addr: Some(addr.clone()),
            ..Options::default()
        },
    )
    .await;
    produce(&addr, "away", 0, &values("after", 1), 1).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut after = Vec::new();
    while after.is_empty() && std::time::Instant::now() < deadline {
        match c.poll(10, Duration::from_millis(300)).await {
            Ok(records) => after.extend(records),
            Err(e) => assert!(e.is_retriable(), "{e}"),
        }
    }
    let values: Vec<_> = after
        .iter()
        .map(|r| r.record.value.clone().unwrap())
        .collect();
    assert_eq!(values, [bytes::Bytes::from("after-0")]);
    c.close().await.unwrap();
    again.stop().await;
}

/// TLS and SASL: SASL_SSL with each mechanism, a wrong password refused with Kafka's
/// error, and SSL alone refused by a listener that demands a login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_with_every_mechanism() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    let (ca_pem, cert, key) = tls_files(&certs);
    let tls = TlsContext::load(nagare_listener::TlsFiles {
        cert,
        key,
        client_ca: None,
        client_auth: nagare_listener::ClientAuth::None,
    })
    .unwrap();
    let n = Nagare::start(
        &dir.path().join("data"),
        Options {
            tls: Some(tls),
            users: vec![("alice", "alice-secret")],
            addr: None,
        },
    )
    .await;
    n.topic("secure", 1);
    let secured = |mechanism: &str, password: &str| {
        let mut c = config(&n.addr);
        c.properties.extend(
            [
                ("security.protocol", "SASL_SSL"),
                ("ssl.ca.location", ca_pem.to_str().unwrap()),
                ("sasl.mechanism", mechanism),
                ("sasl.username", "alice"),
                ("sasl.password", password),
                // librdkafka's, ignored here
                ("enable.idempotence", "true"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        c
    };
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert!(
            share_groups_supported(&secured(mechanism, "alice-secret"))
                .await
                .unwrap(),
            "{mechanism}"
        );
        let err = share_groups_supported(&secured(mechanism, "wrong"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ShareError::Kafka { code: 58, .. }),
            "{mechanism}: {err}"
        );
    }
    // A share group over SASL_SSL (the group config too).
    let c = secured("SCRAM-SHA-256", "alice-secret");
    nagare_share_client::set_group_configs(
        &c,
        "g-secure",
        &[("share.auto.offset.reset", "earliest")],
    )
    .await
    .unwrap();
    let broker_partition = n.broker.partition("secure", 0).unwrap();
    broker_partition
        .append_records(
            &[nagare_core::log::batch::NewRecord {
                value: Some(bytes::Bytes::from_static(b"over tls")),
                timestamp: 1,
                ..Default::default()
            }],
            nagare_core::AckLevel::Leader,
        )
        .await
        .unwrap();
    let consumer = ShareConsumer::join(c, "g-secure", vec!["secure".into()])
        .await
        .unwrap();
    let got = poll_n(&consumer, 1, Duration::from_secs(10)).await;
    assert_eq!(got[0].record.value.as_deref(), Some(&b"over tls"[..]));
    consumer.close().await.unwrap();
    // TLS without a login, on a listener that demands one.
    let mut plain_tls = config(&n.addr);
    plain_tls.properties.extend(
        [
            ("security.protocol", "SSL"),
            ("ssl.ca.location", ca_pem.to_str().unwrap()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let refused = ShareConsumer::join(plain_tls, "g-secure", vec!["secure".into()]).await;
    assert!(refused.is_err());
    // The certificate names 127.0.0.1, not localhost: refused, unless names are not
    // checked (ssl.endpoint.identification.algorithm=none; the chain still is).
    let port = n.addr.rsplit_once(':').unwrap().1;
    let mut by_name = secured("PLAIN", "alice-secret");
    by_name.bootstrap = vec![format!("localhost:{port}")];
    let err = share_groups_supported(&by_name).await.unwrap_err();
    assert!(
        matches!(err, ShareError::Protocol(ref m) if m.contains("TLS")),
        "{err}"
    );
    by_name.properties.push((
        "ssl.endpoint.identification.algorithm".into(),
        "none".into(),
    ));
    assert!(share_groups_supported(&by_name).await.unwrap());
    // Plaintext to a TLS listener: no answer it can read.
    let mut cleartext = config(&n.addr);
    cleartext.request_timeout = Duration::from_secs(2);
    assert!(share_groups_supported(&cleartext).await.is_err());
    n.stop().await;
}

/// SASL without TLS: SCRAM-SHA-512 over plaintext.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let n = Nagare::start(
        dir.path(),
        Options {
            users: vec![("bob", "bob-secret")],
            ..Options::default()
        },
    )
    .await;
    let mut c = config(&n.addr);
    c.properties.extend(
        [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "bob"),
            ("sasl.password", "bob-secret"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    assert!(share_groups_supported(&c).await.unwrap());
    // Without a login the listener refuses the share group.
    let anonymous = ShareConsumer::join(config(&n.addr), "g-anon", vec!["t".into()]).await;
    assert!(anonymous.is_err());
    n.stop().await;
}

/// A CA and a certificate for 127.0.0.1 it signed: (CA PEM path, cert path, key path).
fn tls_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

#[tokio::test]
async fn a_config_it_cannot_honour_is_refused() {
    let cfg = ShareClientConfig {
        bootstrap: vec!["127.0.0.1:9".into()],
        properties: vec![
            ("security.protocol".into(), "SASL_SSL".into()),
            ("sasl.mechanism".into(), "GSSAPI".into()),
        ],
        ..Default::default()
    };
    let err = ShareConsumer::join(cfg, "g", vec!["t".into()])
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ShareError::Config(_)), "{err}");
}

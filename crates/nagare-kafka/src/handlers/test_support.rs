//! What the handler tests share: a real broker on a temp dir with its subsystems, and
//! calling one handler the way a connection does (encode, route, answer, decode), as a
//! given session.

use std::path::Path;
use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use nagare_core::security::{Principal, SecurityConfig};
use nagare_core::{Broker, BrokerConfig, Subsystems};

use super::tests::flatten;
use super::{lookup, str_bytes};
use crate::codec::ParsedRequest;
use crate::session::Session;
use crate::{Config, KafkaState};

/// A broker on `dir` with the default configs, no authentication.
pub(super) fn state(dir: &Path) -> Arc<KafkaState> {
    state_with(dir, SecurityConfig::default(), &[])
}

/// A broker on `dir` with `security`; `topics` are created before the subsystems open.
pub(super) fn state_with(dir: &Path, security: SecurityConfig, topics: &[&str]) -> Arc<KafkaState> {
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .expect("broker");
    for t in topics {
        broker.topic_or_create(t).expect("topic");
    }
    let (core, tasks) =
        Subsystems::open(&broker, Config::default().group_config(), security).expect("subsystems");
    tasks.spawn();
    Arc::new(KafkaState::with_address(
        broker,
        &core,
        Config::default(),
        "127.0.0.1".into(),
        9092,
    ))
}

/// A session authenticated as user `name`.
pub(super) fn user(state: &KafkaState, name: &str) -> Arc<Session> {
    Session::as_user(state, Principal::user(name))
}

/// Calls the handler of `key` on `session`, decoding the answer; the version must be one
/// the handler accepts and the answer must decode to its last byte.
pub(super) async fn call<Req: Encodable, Resp: Decodable>(
    state: &Arc<KafkaState>,
    session: &Arc<Session>,
    key: ApiKey,
    version: i16,
    msg: &Req,
) -> Resp {
    let mut b = BytesMut::new();
    msg.encode(&mut b, version).expect("encode");
    let req = ParsedRequest {
        api_key: key,
        version,
        header: RequestHeader::default().with_client_id(Some(str_bytes("test"))),
        body: b.freeze(),
        followed: false,
    };
    let handler = lookup(key as i16).expect("handler");
    assert!(handler.accepts(version), "{key:?} v{version}");
    let reply = (handler.call)(state.clone(), session.clone(), req)
        .await
        .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
    let mut body = flatten(reply);
    let r = Resp::decode(&mut body, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version} response: {e}"));
    assert!(body.is_empty(), "{key:?} v{version}: bytes left over");
    r
}

/// [`call`] as the anonymous session (everything is allowed without authentication).
pub(super) async fn call_anonymous<Req: Encodable, Resp: Decodable>(
    state: &Arc<KafkaState>,
    key: ApiKey,
    version: i16,
    msg: &Req,
) -> Resp {
    call(state, &Session::for_tests(state), key, version, msg).await
}

//! SaslHandshake (17): the client names its SASL mechanism; the tokens follow in
//! SaslAuthenticate requests (v1). v0 is listed as Kafka lists it (librdkafka before 2.2
//! looks for it to enable SASL at all, then uses v1), but a v0 handshake, after which the
//! tokens would come without Kafka framing, is refused: no maintained client sends one
//! once v1 is listed.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::sasl::{SaslStage, MECHANISMS};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::SaslHandshake,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: SaslHandshakeRequest = decode(&req)?;
    if req.version == 0 {
        tracing::info!(peer = %session.peer, "SASL handshake v0 (unframed tokens) is not supported; closing connection");
        session.close_after_reply();
        return encode(
            &SaslHandshakeResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.counted())
                .with_mechanisms(MECHANISMS.iter().map(|m| str_bytes(*m)).collect()),
            req.version,
        );
    }
    let error = match session.take_sasl() {
        SaslStage::Start => match SaslStage::chosen(request.mechanism.as_str()) {
            Some(stage) => {
                session.set_sasl(stage);
                errors::NONE
            }
            None => {
                tracing::info!(peer = %session.peer, mechanism = %request.mechanism.as_str(), "unsupported SASL mechanism; closing connection");
                session.close_after_reply();
                ResponseError::UnsupportedSaslMechanism.counted()
            }
        },
        _ => {
            tracing::info!(peer = %session.peer, "SASL handshake out of order; closing connection");
            session.close_after_reply();
            ResponseError::IllegalSaslState.counted()
        }
    };
    encode(
        &SaslHandshakeResponse::default()
            .with_error_code(error)
            .with_mechanisms(MECHANISMS.iter().map(|m| str_bytes(*m)).collect()),
        req.version,
    )
}

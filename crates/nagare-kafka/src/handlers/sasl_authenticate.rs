//! SaslAuthenticate (36): one SASL token each way. PLAIN takes one round (the password
//! checked against the user store on the blocking pool); SCRAM two (client-first →
//! server-first, client-final → server-final). Success makes the connection act as the
//! user; failure answers SASL_AUTHENTICATION_FAILED after the login throttle's delay and
//! closes the connection.

use crate::meters::Counted;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use nagare_core::security::Principal;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::sasl::{parse_plain, scram_user, SaslStage, MAX_TOKEN};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::SaslAuthenticate,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

/// What a refused login is told, whatever the reason (it never says whether the user
/// exists).
const REFUSED: &str = "Authentication failed: Invalid username or password";

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: SaslAuthenticateRequest = decode(&req)?;
    let token = request.auth_bytes;
    let outcome = if token.len() > MAX_TOKEN {
        Outcome::Failed(String::new())
    } else {
        step(&session, session.take_sasl(), &token).await
    };
    let response = match outcome {
        Outcome::Continue(reply) => ok(reply),
        Outcome::Authenticated(user, reply) => {
            let security = session.security();
            security.throttle.succeeded_over("kafka", session.peer.ip());
            tracing::debug!(peer = %session.peer, user, "kafka client authenticated");
            session.authenticated_as(Principal::user(&user));
            ok(reply)
        }
        Outcome::Failed(user) => {
            let delay = session
                .security()
                .throttle
                .failed("kafka", session.peer.ip(), &user);
            tokio::time::sleep(delay).await;
            session.close_after_reply();
            refused(ResponseError::SaslAuthenticationFailed.counted(), REFUSED)
        }
        Outcome::OutOfOrder => {
            tracing::info!(peer = %session.peer, "SaslAuthenticate without a handshake; closing connection");
            session.close_after_reply();
            refused(
                ResponseError::IllegalSaslState.counted(),
                "SaslAuthenticate before SaslHandshake or after authentication",
            )
        }
    };
    encode(&response, req.version)
}

enum Outcome {
    /// A token to send back; the exchange goes on.
    Continue(Vec<u8>),
    /// Logged in as this user; the last token to send back.
    Authenticated(String, Vec<u8>),
    /// Refused (the user named, if any, for the log).
    Failed(String),
    OutOfOrder,
}

async fn step(session: &Session, stage: SaslStage, token: &[u8]) -> Outcome {
    let users = &session.security().users;
    match stage {
        SaslStage::Plain => match parse_plain(token) {
            Some(t) if users.verify_plain_async(t.user, t.password).await => {
                Outcome::Authenticated(t.user.to_string(), Vec::new())
            }
            Some(t) => Outcome::Failed(t.user.to_string()),
            None => Outcome::Failed(String::new()),
        },
        SaslStage::ScramFirst(mut exchange) => match exchange.client_first(token, users) {
            Ok(reply) => {
                session.set_sasl(SaslStage::ScramFinal(exchange));
                Outcome::Continue(reply)
            }
            Err(e) => Outcome::Failed(scram_user(&e, Some(&exchange))),
        },
        SaslStage::ScramFinal(mut exchange) => match exchange.client_final(token) {
            Ok((reply, user)) => Outcome::Authenticated(user, reply),
            Err(e) => Outcome::Failed(scram_user(&e, Some(&exchange))),
        },
        SaslStage::Start | SaslStage::Over => Outcome::OutOfOrder,
    }
}

fn ok(reply: Vec<u8>) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(errors::NONE)
        .with_auth_bytes(Bytes::from(reply))
        .with_session_lifetime_ms(0)
}

fn refused(code: i16, message: &str) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(code)
        .with_error_message(Some(str_bytes(message)))
        .with_auth_bytes(Bytes::new())
}

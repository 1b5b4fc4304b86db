//! FindCoordinator (10): this broker coordinates every group and every transactional id
//! (key type 1). Both layouts: one `key` (v0-3, librdkafka) and batched
//! `coordinator_keys` (v4+, the Java client).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::FindCoordinator,
    advertised: (0, 6),
    accepted: (0, 6),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// Key type of a transactional id (0 is a group; 2, share groups, is not supported).
const KEY_TYPE_TRANSACTION: i8 = 1;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: FindCoordinatorRequest = decode(&req)?;
    // Per key, as Kafka: Describe on the group, or on the transactional id.
    let answer = |key: &str| {
        let (allowed, denied) = if request.key_type == KEY_TYPE_TRANSACTION {
            (
                session.allowed(Operation::Describe, ResourceType::TransactionalId, key),
                ResponseError::TransactionalIdAuthorizationFailed,
            )
        } else {
            (
                session.group_allowed(Operation::Describe, key),
                ResponseError::GroupAuthorizationFailed,
            )
        };
        if request.key_type > KEY_TYPE_TRANSACTION || request.key_type < 0 {
            (
                ResponseError::InvalidRequest.counted(),
                -1,
                String::new(),
                -1,
            )
        } else if !allowed {
            (denied.counted(), -1, String::new(), -1)
        } else {
            (
                errors::NONE,
                state.node_id(),
                state.advertised_host.clone(),
                state.advertised_port,
            )
        }
    };
    let mut response = FindCoordinatorResponse::default();
    if req.version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, node, host, port) = answer(key);
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node))
                    .with_host(str_bytes(host))
                    .with_port(port)
                    .with_error_code(error)
            })
            .collect();
    } else {
        let (error, node, host, port) = answer(&request.key);
        response = response
            .with_error_code(error)
            .with_node_id(BrokerId(node))
            .with_host(str_bytes(host))
            .with_port(port);
    }
    encode(&response, req.version)
}

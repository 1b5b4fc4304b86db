//! ShareGroupHeartbeat (76): joins, heartbeats in and leaves a share group (KIP-932); the
//! answer carries the member's epoch and, when it changed, its assignment (every
//! partition of the topics it subscribes to: Kafka's simple assignor).

use std::sync::Arc;

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use nagare_core::security::Operation;
use nagare_core::share_groups::{now_ms, Client};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, share_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ShareGroupHeartbeat,
    advertised: (1, 1),
    accepted: (1, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ShareGroupHeartbeatRequest = decode(&req)?;
    let refuse = |e: ResponseError, message: String| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(e.counted())
            .with_error_message(Some(str_bytes(message)))
    };
    let group = request.group_id.0.to_string();
    let response = if !session.group_allowed(Operation::Read, &request.group_id) {
        refuse(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to read group {group:?}"),
        )
    } else if request.member_epoch == 0
        && state
            .groups
            .list_groups()
            .iter()
            .any(|g| g.group_id == group)
    {
        refuse(
            ResponseError::InconsistentGroupProtocol,
            format!("group {group:?} is not a share group"),
        )
    } else if let Some(denied) = request
        .subscribed_topic_names
        .iter()
        .flatten()
        .find(|t| !session.topic_allowed(Operation::Describe, t))
    {
        refuse(
            ResponseError::TopicAuthorizationFailed,
            format!("not authorized to describe topic {:?}", denied.0.as_str()),
        )
    } else {
        let topics = request
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect());
        let client = Client {
            client_id: req.header.client_id.as_deref().unwrap_or("").to_string(),
            client_host: format!("/{}", session.peer.ip()),
        };
        match state.share.heartbeat(
            &group,
            &request.member_id,
            request.member_epoch,
            request.rack_id.as_deref(),
            topics,
            &client,
            now_ms(),
        ) {
            Ok(answer) => ShareGroupHeartbeatResponse::default()
                .with_error_code(errors::NONE)
                .with_member_id(Some(str_bytes(answer.member_id)))
                .with_member_epoch(answer.member_epoch)
                .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
                .with_assignment(answer.assignment.map(|a| {
                    Assignment::default().with_topic_partitions(
                        a.into_values()
                            .map(|(id, partitions)| {
                                TopicPartitions::default()
                                    .with_topic_id(id)
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    )
                })),
            Err(e) => refuse(share_error(&e), e.to_string()),
        }
    };
    encode(&response, req.version)
}

//! AlterShareGroupOffsets (91): moves an empty share group's start offset on share
//! partitions (`Admin.alterShareGroupOffsets`).

use std::sync::Arc;

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
};
use nagare_core::security::Operation;
use nagare_core::share_groups::ShareError;
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, share_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::AlterShareGroupOffsets,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: AlterShareGroupOffsetsRequest = decode(&req)?;
    let group = request.group_id.0.to_string();
    let whole = |e: ResponseError, message: String| {
        encode(
            &AlterShareGroupOffsetsResponse::default()
                .with_error_code(e.counted())
                .with_error_message(Some(str_bytes(message))),
            req.version,
        )
    };
    if !session.group_allowed(Operation::Read, &request.group_id) {
        return whole(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to read group {group:?}"),
        );
    }
    // A group id not used yet becomes an empty share group; a classic or consumer
    // group's is refused.
    if !state.share.exists(&group)
        && state
            .groups
            .list_groups()
            .iter()
            .any(|g| g.group_id == group)
    {
        return whole(
            ResponseError::GroupIdNotFound,
            format!("group {group:?} is not a share group"),
        );
    }
    if state.share.has_members(&group) {
        let e = ShareError::GroupNotEmpty(group.clone());
        return whole(share_error(&e), e.to_string());
    }
    let mut topics = Vec::new();
    for t in &request.topics {
        let name = t.topic_name.0.as_str();
        let allowed = session.topic_allowed(Operation::Read, name);
        let topic = state.broker.topic(name);
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let code = if !allowed {
                ResponseError::TopicAuthorizationFailed.counted()
            } else if topic.as_ref().is_none_or(|t| {
                p.partition_index < 0 || p.partition_index as usize >= t.partition_count()
            }) {
                ResponseError::UnknownTopicOrPartition.counted()
            } else {
                match state
                    .share
                    .alter_start_offset(&group, name, p.partition_index, p.start_offset)
                    .await
                {
                    Ok(()) => errors::NONE,
                    Err(e) => share_error(&e).counted(),
                }
            };
            partitions.push(
                AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        topics.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(topic.map_or(Uuid::nil(), |t| t.id()))
                .with_partitions(partitions),
        );
    }
    encode(
        &AlterShareGroupOffsetsResponse::default()
            .with_error_code(errors::NONE)
            .with_responses(topics),
        req.version,
    )
}

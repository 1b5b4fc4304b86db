//! DeleteShareGroupOffsets (92): forgets an empty share group's state on whole topics
//! (`Admin.deleteShareGroupOffsets`); it starts afresh per `share.auto.offset.reset`.

use std::sync::Arc;

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
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
    key: ApiKey::DeleteShareGroupOffsets,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DeleteShareGroupOffsetsRequest = decode(&req)?;
    let group = request.group_id.0.to_string();
    let whole = |e: ResponseError, message: String| {
        encode(
            &DeleteShareGroupOffsetsResponse::default()
                .with_error_code(e.counted())
                .with_error_message(Some(str_bytes(message))),
            req.version,
        )
    };
    if !session.group_allowed(Operation::Delete, &request.group_id) {
        return whole(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to delete group {group:?}"),
        );
    }
    if !state.share.exists(&group) {
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
        let topic = state.broker.topic(name);
        let code = if !session.topic_allowed(Operation::Read, name) {
            ResponseError::TopicAuthorizationFailed.counted()
        } else if topic.is_none() {
            ResponseError::UnknownTopicOrPartition.counted()
        } else {
            match state.share.delete_start_offsets(&group, name).await {
                Ok(()) => errors::NONE,
                Err(e) => share_error(&e).counted(),
            }
        };
        topics.push(
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(topic.map_or(Uuid::nil(), |t| t.id()))
                .with_error_code(code),
        );
    }
    encode(
        &DeleteShareGroupOffsetsResponse::default()
            .with_error_code(errors::NONE)
            .with_responses(topics),
        req.version,
    )
}

//! ShareGroupDescribe (77): share groups with their state, epoch and members (with
//! their subscriptions and assignments).

use std::sync::Arc;

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ShareGroupDescribe,
    advertised: (1, 1),
    accepted: (1, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ShareGroupDescribeRequest = decode(&req)?;
    let groups = request
        .group_ids
        .iter()
        .map(|id| {
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(i32::MIN);
            if !session.group_allowed(Operation::Describe, id) {
                return described
                    .with_error_code(ResponseError::GroupAuthorizationFailed.counted());
            }
            let Some(info) = state.share.describe(id) else {
                return described
                    .with_error_code(ResponseError::GroupIdNotFound.counted())
                    .with_error_message(Some(str_bytes(format!(
                        "group {:?} is not a share group",
                        id.0.as_str()
                    ))));
            };
            let members = info
                .members
                .into_iter()
                .map(|m| {
                    let partitions = m
                        .assignment
                        .into_iter()
                        .map(|(topic, (topic_id, partitions))| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_topic_name(TopicName(str_bytes(topic)))
                                .with_partitions(partitions)
                        })
                        .collect();
                    Member::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_rack_id(m.rack.map(str_bytes))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(str_bytes(m.client_id))
                        .with_client_host(str_bytes(m.client_host))
                        .with_subscribed_topic_names(
                            m.topics
                                .into_iter()
                                .map(|t| TopicName(str_bytes(t)))
                                .collect(),
                        )
                        .with_assignment(Assignment::default().with_topic_partitions(partitions))
                })
                .collect();
            let ops = if request.include_authorized_operations {
                session.authorized_operations(ResourceType::Group, id)
            } else {
                i32::MIN
            };
            described
                .with_error_code(errors::NONE)
                .with_group_state(str_bytes(info.state))
                .with_group_epoch(info.epoch)
                .with_assignment_epoch(info.epoch)
                .with_assignor_name(str_bytes("simple"))
                .with_members(members)
                .with_authorized_operations(ops)
        })
        .collect();
    encode(
        &ShareGroupDescribeResponse::default().with_groups(groups),
        req.version,
    )
}

//! ConsumerGroupDescribe (69): state, epochs, assignor and members (with their current
//! and target assignments) of KIP-848 consumer groups. A classic or unknown group is
//! GROUP_ID_NOT_FOUND, as in Kafka.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use nagare_core::groups::{self, TopicsSnapshot};
use nagare_core::security::{Operation, ResourceType};

use super::consumer_group_heartbeat::topics_snapshot;
use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ConsumerGroupDescribe,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ConsumerGroupDescribeRequest = decode(&req)?;
    let topics = topics_snapshot(&state.broker);
    let groups = request
        .group_ids
        .iter()
        .map(|id| {
            if !session.group_allowed(Operation::Describe, id) {
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(ResponseError::GroupAuthorizationFailed.counted());
            }
            let mut group = match state.groups.describe_consumer_group(id) {
                Err(e) => DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(group_error(&e).counted())
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} not found or not a consumer group.",
                        id.0
                    )))),
                Ok(d) => DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(errors::NONE)
                    .with_group_state(str_bytes(d.state))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(str_bytes(d.assignor))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|(m, target)| member(m, &target, &topics))
                            .collect(),
                    ),
            };
            group.authorized_operations = if request.include_authorized_operations {
                session.authorized_operations(ResourceType::Group, id)
            } else {
                i32::MIN
            };
            group
        })
        .collect();
    encode(
        &ConsumerGroupDescribeResponse::default().with_groups(groups),
        req.version,
    )
}

fn member(
    m: groups::ConsumerMember,
    target: &groups::Assignment,
    topics: &TopicsSnapshot,
) -> Member {
    Member::default()
        .with_member_id(str_bytes(m.member_id))
        .with_instance_id(m.instance_id.map(str_bytes))
        .with_rack_id(m.rack_id.map(str_bytes))
        .with_member_epoch(m.member_epoch)
        .with_client_id(str_bytes(m.client_id))
        .with_client_host(str_bytes(m.client_host))
        .with_subscribed_topic_names(
            m.subscribed_topic_names
                .into_iter()
                .map(|t| TopicName(str_bytes(t)))
                .collect(),
        )
        .with_subscribed_topic_regex(m.subscribed_topic_regex.map(str_bytes))
        .with_assignment(assignment(&m.assigned, topics))
        .with_target_assignment(assignment(target, topics))
        // 1: a member of the consumer protocol (0 would be a classic member).
        .with_member_type(1)
}

fn assignment(a: &groups::Assignment, topics: &TopicsSnapshot) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.iter()
            .filter_map(|(name, ps)| {
                let meta = topics.get(name)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(meta.id)
                        .with_topic_name(TopicName(str_bytes(name.clone())))
                        .with_partitions(ps.iter().copied().collect()),
                )
            })
            .collect(),
    )
}

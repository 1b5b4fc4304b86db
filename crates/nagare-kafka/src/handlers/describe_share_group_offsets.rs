//! DescribeShareGroupOffsets (90): each share partition's start offset for a share
//! group (everything below it is settled), as `Admin.listShareGroupOffsets` asks.

use std::sync::Arc;

use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use nagare_core::security::Operation;
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeShareGroupOffsets,
    // v1 (lag) is not in kafka-protocol 0.18.
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeShareGroupOffsetsRequest = decode(&req)?;
    let groups = request
        .groups
        .iter()
        .map(|g| {
            let answer =
                DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
            if !session.group_allowed(Operation::Describe, &g.group_id) {
                return answer.with_error_code(ResponseError::GroupAuthorizationFailed.counted());
            }
            if !state.share.exists(&g.group_id) {
                return answer
                    .with_error_code(ResponseError::GroupIdNotFound.counted())
                    .with_error_message(Some(str_bytes(format!(
                        "group {:?} is not a share group",
                        g.group_id.0.as_str()
                    ))));
            }
            let known = state.share.start_offsets(&g.group_id);
            let id_of = |t: &str| state.broker.topic(t).map_or(Uuid::nil(), |t| t.id());
            let topics: Vec<DescribeShareGroupOffsetsResponseTopic> = match &g.topics {
                // All: every share partition the group has state for.
                None => {
                    let mut out: Vec<DescribeShareGroupOffsetsResponseTopic> = Vec::new();
                    for s in known
                        .iter()
                        .filter(|s| session.topic_allowed(Operation::Describe, &s.topic))
                    {
                        let p = DescribeShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(s.partition)
                            .with_start_offset(s.start_offset)
                            .with_leader_epoch(0)
                            .with_error_code(errors::NONE);
                        match out.iter_mut().find(|t| t.topic_name.0.as_str() == s.topic) {
                            Some(t) => t.partitions.push(p),
                            None => out.push(
                                DescribeShareGroupOffsetsResponseTopic::default()
                                    .with_topic_name(TopicName(str_bytes(s.topic.clone())))
                                    .with_topic_id(id_of(&s.topic))
                                    .with_partitions(vec![p]),
                            ),
                        }
                    }
                    out
                }
                Some(wanted) => wanted
                    .iter()
                    .map(|t| {
                        let allowed = session.topic_allowed(Operation::Describe, &t.topic_name);
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|&index| {
                                let p = DescribeShareGroupOffsetsResponsePartition::default()
                                    .with_partition_index(index)
                                    .with_leader_epoch(0);
                                if !allowed {
                                    return p.with_start_offset(-1).with_error_code(
                                        ResponseError::TopicAuthorizationFailed.counted(),
                                    );
                                }
                                // Not started yet: -1, as Kafka answers.
                                let start = known
                                    .iter()
                                    .find(|s| {
                                        s.topic == t.topic_name.0.as_str() && s.partition == index
                                    })
                                    .map_or(-1, |s| s.start_offset);
                                p.with_start_offset(start).with_error_code(errors::NONE)
                            })
                            .collect();
                        DescribeShareGroupOffsetsResponseTopic::default()
                            .with_topic_name(t.topic_name.clone())
                            .with_topic_id(id_of(&t.topic_name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            };
            answer.with_error_code(errors::NONE).with_topics(topics)
        })
        .collect();
    encode(
        &DescribeShareGroupOffsetsResponse::default().with_groups(groups),
        req.version,
    )
}

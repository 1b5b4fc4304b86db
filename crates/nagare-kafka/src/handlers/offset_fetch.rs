//! OffsetFetch (9): committed offsets (-1 where none) with their metadata; one group up
//! to v7, several groups per request from v8. With `require_stable` (v7+, what
//! read_committed consumers send, KIP-447) a partition for which an open transaction
//! holds an offset is answered UNSTABLE_OFFSET_COMMIT, which the client retries.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use nagare_core::groups::{CommittedOffset, TopicPartition};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetFetch,
    advertised: (1, 9),
    accepted: (1, 9),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// One topic's partitions with what is committed for each, and the error every one of
/// them gets (TOPIC_AUTHORIZATION_FAILED for a topic the client may not describe).
type TopicOffsets = (String, i16, Vec<(i32, Option<CommittedOffset>)>);

/// The committed offsets of one group, grouped by topic in request order (or the
/// group's own order when all are asked for). As Kafka: named topics the client may not
/// describe are answered TOPIC_AUTHORIZATION_FAILED; when all are asked for, they are
/// left out.
fn fetch(
    state: &KafkaState,
    session: &Session,
    group: &str,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<TopicOffsets> {
    let mut denied: Vec<TopicOffsets> = Vec::new();
    let wanted: Option<Vec<TopicPartition>> = asked.map(|topics| {
        let mut wanted = Vec::new();
        for (t, ps) in topics {
            if session.topic_allowed(Operation::Describe, &t) {
                wanted.extend(ps.into_iter().map(|p| (t.clone(), p)));
            } else {
                let partitions = ps.into_iter().map(|p| (p, None)).collect();
                denied.push((
                    t,
                    ResponseError::TopicAuthorizationFailed.counted(),
                    partitions,
                ));
            }
        }
        wanted
    });
    let all = wanted.is_none();
    let found = state.groups.fetch_offsets(group, wanted.as_deref());
    let mut out: Vec<TopicOffsets> = Vec::new();
    for ((topic, partition), offset) in found {
        match out.last_mut() {
            Some((t, _, ps)) if *t == topic => ps.push((partition, offset)),
            _ => out.push((topic, errors::NONE, vec![(partition, offset)])),
        }
    }
    if all {
        out.retain(|(t, _, _)| session.topic_allowed(Operation::Describe, t));
    }
    out.extend(denied);
    out
}

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: OffsetFetchRequest = decode(&req)?;
    let v = req.version;
    let mut response = OffsetFetchResponse::default();
    if v >= 8 {
        for g in &request.groups {
            let asked = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            if !session.group_allowed(Operation::Describe, &g.group_id) {
                response.groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(ResponseError::GroupAuthorizationFailed.counted()),
                );
                continue;
            }
            // A consumer-protocol member (v9+) must be current, as Kafka checks.
            if let Some(member) = g.member_id.as_ref().filter(|m| !m.is_empty()) {
                if let Err(e) =
                    state
                        .groups
                        .check_consumer_member(&g.group_id.0, member, g.member_epoch)
                {
                    response.groups.push(
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(crate::errors::group_error(&e).counted()),
                    );
                    continue;
                }
            }
            let topics = fetch(&state, &session, &g.group_id.0, asked)
                .into_iter()
                .map(|(t, error, ps)| {
                    let unstable = |p| {
                        request.require_stable
                            && error == errors::NONE
                            && state.transactions.has_pending_offset(&g.group_id.0, &t, p)
                    };
                    let ps: Vec<_> = ps
                        .into_iter()
                        .map(|(p, o)| {
                            if unstable(p) {
                                (p, None, unstable_code())
                            } else {
                                (p, o, error)
                            }
                        })
                        .collect();
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o, error)| {
                                    let (offset, epoch, meta) = parts(o);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_error_code(error)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(str_bytes(meta)))
                                })
                                .collect(),
                        )
                })
                .collect();
            response.groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_topics(topics),
            );
        }
    } else {
        let asked = request.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        if !session.group_allowed(Operation::Describe, &request.group_id) {
            return encode(&group_refused(&request, v), v);
        }
        let group = &request.group_id.0;
        response.topics = fetch(&state, &session, group, asked)
            .into_iter()
            .map(|(t, error, ps)| {
                let unstable = |p| {
                    v >= 7
                        && request.require_stable
                        && error == errors::NONE
                        && state.transactions.has_pending_offset(group, &t, p)
                };
                let ps: Vec<_> = ps
                    .into_iter()
                    .map(|(p, o)| {
                        if unstable(p) {
                            (p, None, unstable_code())
                        } else {
                            (p, o, error)
                        }
                    })
                    .collect();
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(str_bytes(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|(p, o, error)| {
                                let (offset, epoch, meta) = parts(o);
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(error)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(if v >= 5 { epoch } else { -1 })
                                    .with_metadata(Some(str_bytes(meta)))
                            })
                            .collect(),
                    )
            })
            .collect();
    }
    encode(&response, v)
}

/// Kafka's answer (v1-7) for a group the client may not describe: the error at the top
/// (v2+) and, as v1 has no top-level error, on every partition asked for.
fn group_refused(request: &OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let error = ResponseError::GroupAuthorizationFailed.counted();
    let mut response = OffsetFetchResponse::default();
    if version >= 2 {
        response.error_code = error;
        return response;
    }
    response.topics = request
        .topics
        .iter()
        .flatten()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(-1)
                                .with_metadata(Some(str_bytes("")))
                                .with_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect();
    response
}

/// A partition whose offset an open transaction may still change (KIP-447).
fn unstable_code() -> i16 {
    ResponseError::UnstableOffsetCommit.counted()
}

/// Offset, leader epoch and metadata to report: -1 and "" for nothing committed.
fn parts(o: Option<CommittedOffset>) -> (i64, i32, String) {
    match o {
        Some(o) => (o.offset, o.leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

//! OffsetFetch (9): committed offsets (-1 where none) with their metadata; one group up
//! to v7, several groups per request from v8.

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use nagare_core::groups::{CommittedOffset, TopicPartition};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetFetch,
    advertised: (1, 9),
    accepted: (1, 9),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

/// One topic's partitions with what is committed for each.
type TopicOffsets = (String, Vec<(i32, Option<CommittedOffset>)>);

/// The committed offsets of one group, grouped by topic in request order (or the
/// group's own order when all are asked for).
fn fetch(
    state: &KafkaState,
    group: &str,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<TopicOffsets> {
    let wanted: Option<Vec<TopicPartition>> = asked.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    });
    let found = state.groups.fetch_offsets(group, wanted.as_deref());
    let mut out: Vec<TopicOffsets> = Vec::new();
    for ((topic, partition), offset) in found {
        match out.last_mut() {
            Some((t, ps)) if *t == topic => ps.push((partition, offset)),
            _ => out.push((topic, vec![(partition, offset)])),
        }
    }
    out
}

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
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
            let topics = fetch(&state, &g.group_id.0, asked)
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o)| {
                                    let (offset, epoch, meta) = parts(o);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
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
        response.topics = fetch(&state, &request.group_id.0, asked)
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(str_bytes(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|(p, o)| {
                                let (offset, epoch, meta) = parts(o);
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
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

/// Offset, leader epoch and metadata to report: -1 and "" for nothing committed.
fn parts(o: Option<CommittedOffset>) -> (i64, i32, String) {
    match o {
        Some(o) => (o.offset, o.leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

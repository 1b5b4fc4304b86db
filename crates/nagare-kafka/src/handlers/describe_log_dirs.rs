//! DescribeLogDirs (35): the one data directory, the size of each partition in it and
//! (v4+) the file system's total and usable bytes. Needs Describe on the cluster; a
//! client without it gets CLUSTER_AUTHORIZATION_FAILED (v3+) or nothing listed.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeLogDirs,
    advertised: (1, 4),
    accepted: (1, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeLogDirsRequest = decode(&req)?;
    if !session.cluster_allowed(Operation::Describe) {
        let mut response = DescribeLogDirsResponse::default();
        if req.version >= 3 {
            response.error_code = ResponseError::ClusterAuthorizationFailed.counted();
        }
        return encode(&response, req.version);
    }
    let broker = &state.broker;
    // A null topic list means every partition; otherwise the ones named that exist.
    let wanted: Vec<(String, Vec<i32>)> = match &request.topics {
        None => broker
            .list_topics()
            .iter()
            .map(|t| {
                let parts = (0..t.partition_count() as i32).collect();
                (t.name().to_string(), parts)
            })
            .collect(),
        Some(topics) => topics
            .iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()))
            .collect(),
    };
    let topics = wanted
        .into_iter()
        .filter_map(|(name, parts)| {
            let topic = broker.topic(&name)?;
            let partitions: Vec<_> = parts
                .into_iter()
                .filter_map(|i| topic.partition(i).ok())
                .map(|p| {
                    DescribeLogDirsPartition::default()
                        .with_partition_index(p.index())
                        .with_partition_size(p.size_bytes() as i64)
                        .with_offset_lag(0)
                        .with_is_future_key(false)
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(kafka_protocol::messages::TopicName(str_bytes(name)))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let dir = std::fs::canonicalize(broker.data_dir())
        .unwrap_or_else(|_| broker.data_dir().to_path_buf());
    // statvfs reads the superblock's counters: no disk I/O worth a blocking task.
    let (usable, total) = match rustix::fs::statvfs(broker.data_dir()) {
        Ok(v) => (
            v.f_bavail.saturating_mul(v.f_frsize) as i64,
            v.f_blocks.saturating_mul(v.f_frsize) as i64,
        ),
        Err(_) => (-1, -1),
    };
    let mut result = DescribeLogDirsResult::default()
        .with_error_code(errors::NONE)
        .with_log_dir(str_bytes(dir.display().to_string()))
        .with_topics(topics);
    if req.version >= 4 {
        result = result.with_total_bytes(total).with_usable_bytes(usable);
    }
    encode(
        &DescribeLogDirsResponse::default()
            .with_error_code(errors::NONE)
            .with_results(vec![result]),
        req.version,
    )
}

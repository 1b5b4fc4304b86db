//! Writing the COMMIT/ABORT markers that end a transaction in each of its partitions
//! (what Kafka's coordinator sends as WriteTxnMarkers; here every partition is local).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::{AckLevel, Broker, CoreError, Partition};

/// The coordinator epoch written in markers. Kafka's is the leader epoch of the
/// coordinator's transaction-log partition; a single node never changes coordinator.
pub(super) const COORDINATOR_EPOCH: i32 = 0;

/// Writes the marker ending `producer_id`'s transaction in every partition, all at once;
/// each is durable when this returns `Ok`. A partition that no longer exists (its topic
/// was deleted) is skipped, as Kafka drops markers for deleted partitions; so is one that
/// has seen a newer epoch of the producer (a later marker already ended it there).
pub(super) async fn write_markers(
    broker: &Broker,
    partitions: &BTreeSet<(String, i32)>,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> Result<(), CoreError> {
    let mut tasks = JoinSet::new();
    for (topic, index) in partitions {
        let partition = match broker.partition(topic, *index) {
            Ok(p) => p,
            Err(CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. }) => {
                tracing::info!(
                    topic,
                    partition = index,
                    "no marker for a partition that no longer exists"
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        tasks.spawn(async move { write_marker(&partition, producer_id, epoch, commit).await });
    }
    let mut result = Ok(());
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.unwrap_or(Err(CoreError::ShuttingDown));
        match outcome {
            Ok(()) => {}
            Err(CoreError::InvalidProducerEpoch { .. }) => {
                tracing::warn!(
                    producer_id,
                    epoch,
                    "marker refused: the partition knows a newer epoch"
                );
            }
            Err(e) => {
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
    }
    result
}

/// Fsyncs every partition of a transaction up to its current end, all at once (group
/// commit joins them with any other waiter). Partitions that no longer exist are skipped.
pub(super) async fn sync_partitions(
    broker: &Broker,
    partitions: &BTreeSet<(String, i32)>,
) -> Result<(), CoreError> {
    let mut tasks = JoinSet::new();
    for (topic, index) in partitions {
        let partition = match broker.partition(topic, *index) {
            Ok(p) => p,
            Err(CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. }) => continue,
            Err(e) => return Err(e),
        };
        tasks.spawn(async move {
            let end = partition.log_end_offset();
            partition.wait_durable(end, AckLevel::Durable).await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap_or(Err(CoreError::ShuttingDown))?;
    }
    Ok(())
}

async fn write_marker(
    partition: &Arc<Partition>,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> Result<(), CoreError> {
    partition
        .write_txn_marker(producer_id, epoch, commit, COORDINATOR_EPOCH)
        .await
        .map(|_| ())
}

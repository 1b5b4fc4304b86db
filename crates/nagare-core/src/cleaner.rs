//! The background log cleaner: compacts the partitions of topics whose `cleanup.policy`
//! includes `compact` (Kafka's `LogCleaner`/`LogCleanerManager`), one partition at a
//! time on one blocking thread, dirtiest first, every `backoff` (Kafka's
//! `log.cleaner.backoff.ms`). The algorithm itself is `nagare_log::cleaner`.
//!
//! `compact,delete` topics also get time and size retention, from the maintenance task
//! like any `delete` topic; `compact` alone gets none (`TopicConfig::log_config`).
//!
//! Also here: the produce-side rule of compacted topics, a record without a key is
//! refused (`INVALID_RECORD` on the Kafka wire), since compaction could not keep it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use nagare_log::batch::BatchHeader;
use nagare_log::cleaner::{CleanStats, Cleaner, CompactionConfig};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::{Broker, CoreError, Partition, TopicConfig};

/// Settings of the cleaner thread (the broker's `log.cleaner.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable`.
    pub enabled: bool,
    /// `log.cleaner.backoff.ms`: sleep between looks for dirty partitions.
    pub backoff: Duration,
    /// `log.cleaner.dedupe.buffer.size`: memory of the offset map, allocated on the
    /// first pass and reused.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second` (`None`: unlimited).
    pub io_max_bytes_per_sec: Option<u64>,
}

impl Default for CleanerSettings {
    fn default() -> Self {
        CleanerSettings {
            enabled: true,
            backoff: Duration::from_secs(15),
            // Kafka's default is 128 MiB; a single node with a few compacted topics
            // rarely needs more than this, and larger data sets just take more passes.
            dedupe_buffer_bytes: 32 << 20,
            io_max_bytes_per_sec: None,
        }
    }
}

/// Passes on one partition in a row at most, before the others get their turn.
const MAX_PASSES_IN_A_ROW: usize = 16;

/// A topic's compaction settings in the log's terms.
pub(crate) fn compaction_config(t: &TopicConfig) -> CompactionConfig {
    CompactionConfig {
        delete_retention_ms: t.delete_retention_ms.max(0),
        min_compaction_lag_ms: t.min_compaction_lag_ms.max(0),
        max_compaction_lag_ms: if t.max_compaction_lag_ms <= 0 {
            i64::MAX
        } else {
            t.max_compaction_lag_ms
        },
        min_cleanable_dirty_ratio: t.min_cleanable_dirty_ratio,
    }
}

/// Refuses batches holding a record without a key when the partition's topic is
/// compacted (Kafka: "Compacted topic cannot accept message without key").
pub(crate) fn refuse_keyless(
    p: &Partition,
    batches: &[(BytesMut, BatchHeader)],
) -> Result<(), CoreError> {
    if !p.is_compacted() {
        return Ok(());
    }
    for (b, h) in batches {
        if h.is_control() {
            continue;
        }
        if !nagare_log::cleaner::all_records_keyed(b).map_err(|e| CoreError::Log(e.into()))? {
            return Err(CoreError::InvalidRecord(format!(
                "compacted topic {} cannot accept a record without a key",
                p.topic()
            )));
        }
    }
    Ok(())
}

impl Broker {
    /// Runs the cleaner until `stop` turns true (does nothing when disabled).
    pub async fn run_log_cleaner(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let settings = self.config().log_cleaner.clone();
        if !settings.enabled {
            return;
        }
        let cleaner: Arc<Mutex<Option<Cleaner>>> = Arc::new(Mutex::new(None));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(settings.backoff.max(Duration::from_millis(10))) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() || self.is_closed() {
                return;
            }
            let broker = self.clone();
            let cleaner = cleaner.clone();
            let settings = settings.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let mut guard = cleaner.lock();
                broker.clean_dirtiest(&mut guard, &settings, nagare_log::now_ms())
            })
            .await;
        }
    }

    /// Cleans every partition of a compacted topic that needs it, dirtiest first; returns
    /// how many passes ran. Blocking. The offset map is allocated on first need.
    pub fn clean_dirtiest(
        &self,
        cleaner: &mut Option<Cleaner>,
        settings: &CleanerSettings,
        now_ms: i64,
    ) -> usize {
        let mut candidates: Vec<(f64, Arc<Partition>, CompactionConfig)> = Vec::new();
        let mut max_ratio = 0.0f64;
        for topic in self.list_topics() {
            let config = topic.config();
            if !config.cleanup_policy.compact() {
                continue;
            }
            let cc = compaction_config(&config);
            for p in topic.partitions() {
                // A cluster's partition is compacted by the cluster.
                let Some(log) = p.log() else { continue };
                // max.compaction.lag.ms also holds for records still in the active
                // segment of a partition nobody writes to any more.
                if let Err(e) = log.roll_if_compaction_overdue(&cc, now_ms) {
                    tracing::warn!(topic = p.topic(), partition = p.index(), error = %e, "rolling an overdue segment for compaction failed");
                }
                let c = log.cleanability(&cc, now_ms);
                max_ratio = max_ratio.max(c.dirty_ratio());
                if c.needs_cleaning(&cc) {
                    // Overdue partitions first (their ratio may be low).
                    let rank = if c.overdue { 2.0 } else { c.dirty_ratio() };
                    candidates.push((rank, p, cc.clone()));
                }
            }
        }
        metrics::gauge!("nagare_cleaner_max_dirty_ratio").set(max_ratio);
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut passes = 0;
        for (_, p, cc) in candidates {
            if self.is_closed() {
                break;
            }
            let cleaner = cleaner.get_or_insert_with(|| {
                Cleaner::new(settings.dedupe_buffer_bytes, settings.io_max_bytes_per_sec)
            });
            for _ in 0..MAX_PASSES_IN_A_ROW {
                passes += 1;
                match clean_partition(&p, cleaner, &cc, now_ms) {
                    Ok(stats) if stats.map_full => continue,
                    Ok(_) => break,
                    Err(e) => {
                        metrics::counter!("nagare_cleaner_errors_total").increment(1);
                        tracing::error!(topic = p.topic(), partition = p.index(), error = %e, "log cleaning failed");
                        break;
                    }
                }
            }
        }
        passes
    }
}

/// One pass over one partition, with its log line and metrics.
pub(crate) fn clean_partition(
    p: &Partition,
    cleaner: &mut Cleaner,
    config: &CompactionConfig,
    now_ms: i64,
) -> Result<CleanStats, CoreError> {
    let started = Instant::now();
    let Some(log) = p.log() else {
        return Ok(CleanStats::default());
    };
    let stats = log
        .clean(cleaner, config, now_ms)
        .map_err(|source| CoreError::Storage {
            topic: p.topic().to_string(),
            partition: p.index(),
            source,
        })?;
    if stats.segments_before == 0 {
        return Ok(stats);
    }
    let secs = started.elapsed().as_secs_f64();
    metrics::counter!("nagare_cleaner_passes_total").increment(1);
    metrics::counter!("nagare_cleaner_bytes_read_total").increment(stats.bytes_read);
    metrics::counter!("nagare_cleaner_bytes_written_total").increment(stats.bytes_written);
    metrics::counter!("nagare_cleaner_records_removed_total").increment(stats.records_removed);
    metrics::gauge!("nagare_cleaner_last_pass_seconds").set(secs);
    tracing::info!(
        topic = p.topic(),
        partition = p.index(),
        bytes_before = stats.bytes_before,
        bytes_after = stats.bytes_after,
        records_removed = stats.records_removed,
        tombstones_removed = stats.tombstones_removed,
        markers_removed = stats.markers_removed,
        segments_before = stats.segments_before,
        segments_after = stats.segments_after,
        cleaned_up_to = stats.cleaned_up_to,
        map_full = stats.map_full,
        mb_per_sec = format!("{:.1}", stats.bytes_read as f64 / secs.max(1e-9) / 1e6),
        "log cleaned"
    );
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AckLevel, BrokerConfig};
    use nagare_log::batch::{decode_records, NewRecord};

    #[tokio::test]
    async fn a_quiet_partition_is_compacted_within_max_compaction_lag() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let mut config = TopicConfig::default();
        config.set("cleanup.policy", "compact").unwrap();
        config.set("max.compaction.lag.ms", "60000").unwrap();
        let t = broker.create_topic("quiet", Some(1), config).unwrap();
        let p = t.partition(0).unwrap();
        let now = nagare_log::now_ms();
        for i in 0..30 {
            let r = NewRecord {
                key: Some(format!("k{}", i % 3).into_bytes().into()),
                value: Some(format!("v{i}").into_bytes().into()),
                headers: vec![],
                timestamp: now,
            };
            p.append_records(&[r], AckLevel::Leader).await.unwrap();
        }
        let settings = CleanerSettings::default();
        let mut cleaner = None;
        let count = |p: &Partition| -> usize {
            let log = p.log().unwrap();
            log.read_batches(log.log_start_offset(), 1 << 20)
                .unwrap()
                .iter()
                .map(|b| decode_records(b).unwrap().len())
                .sum()
        };
        // Within the lag: everything is in the active segment, nothing happens.
        broker.clean_dirtiest(&mut cleaner, &settings, now + 30_000);
        assert_eq!((p.segment_count(), count(&p)), (1, 30));
        // Past it: the active segment is rolled and cleaned, one record per key left.
        assert!(broker.clean_dirtiest(&mut cleaner, &settings, now + 61_000) > 0);
        assert_eq!((p.segment_count(), count(&p)), (2, 3));
    }
}

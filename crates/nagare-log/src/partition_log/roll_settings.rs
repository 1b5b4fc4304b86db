//! The segment settings a live log follows (`segment.bytes`, `segment.ms`,
//! `index.interval.bytes`): set at open from the [`LogConfig`] and changed at run time
//! (AlterConfigs / IncrementalAlterConfigs) without reopening the log, as in Kafka: a new
//! size or age applies to the active segment from the next append or roll check, a new
//! index interval to the next index entries.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::PartitionLog;
use crate::LogConfig;

pub(super) struct RollSettings {
    segment_bytes: AtomicU64,
    segment_age_ms: AtomicU64,
    index_interval_bytes: AtomicU32,
}

impl RollSettings {
    pub(super) fn new(config: &LogConfig) -> RollSettings {
        RollSettings {
            segment_bytes: AtomicU64::new(config.segment_bytes),
            segment_age_ms: AtomicU64::new(millis(config.segment_age)),
            index_interval_bytes: AtomicU32::new(config.index_interval_bytes),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl PartitionLog {
    /// Takes new segment settings; the next append and roll check use them.
    pub fn set_roll_settings(
        &self,
        segment_bytes: u64,
        segment_age: Duration,
        index_interval_bytes: u32,
    ) {
        let r = &self.rolls;
        r.segment_bytes.store(segment_bytes, Ordering::Relaxed);
        r.segment_age_ms
            .store(millis(segment_age), Ordering::Relaxed);
        r.index_interval_bytes
            .store(index_interval_bytes, Ordering::Relaxed);
    }

    /// Roll once the active segment is this large (positions in the index are 32 bits;
    /// Kafka caps segments the same way).
    pub(super) fn segment_bytes(&self) -> u64 {
        self.rolls
            .segment_bytes
            .load(Ordering::Relaxed)
            .clamp(1, i32::MAX as u64)
    }

    /// Roll once the active segment is this old.
    pub(super) fn segment_age(&self) -> Duration {
        Duration::from_millis(self.rolls.segment_age_ms.load(Ordering::Relaxed))
    }

    /// Bytes between sparse index entries.
    pub(super) fn index_interval(&self) -> u32 {
        self.rolls
            .index_interval_bytes
            .load(Ordering::Relaxed)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, NewRecord};
    use bytes::Bytes;

    fn batch_of(bytes: usize) -> bytes::BytesMut {
        build_batch(&[NewRecord {
            value: Some(Bytes::from(vec![b'x'; bytes])),
            timestamp: 1,
            ..Default::default()
        }])
    }

    #[test]
    fn a_smaller_segment_size_or_age_rolls_the_open_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
        for _ in 0..4 {
            log.append(&mut batch_of(1000)).unwrap();
        }
        assert_eq!(log.segment_count(), 1);
        log.set_roll_settings(2048, Duration::from_secs(3600), 64);
        for _ in 0..4 {
            log.append(&mut batch_of(1000)).unwrap();
        }
        assert!(log.segment_count() >= 3, "{}", log.segment_count());
        assert_eq!(log.index_interval(), 64);
        // An age of zero: the next roll check rolls the non-empty active segment.
        log.set_roll_settings(1 << 30, Duration::ZERO, 4096);
        let before = log.segment_count();
        log.append(&mut batch_of(10)).unwrap();
        assert!(log.maybe_roll().unwrap() || log.segment_count() > before);
    }
}

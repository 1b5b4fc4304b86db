//! Produce's check of producer timestamps against the topic's
//! `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`, as Kafka's
//! `LogValidator`: with `CreateTime`, a record stamped more than `before` in the past or
//! more than `after` in the future (of the broker's clock) fails its whole partition's
//! batches with INVALID_TIMESTAMP, so nothing of them is stored; records without a
//! timestamp (-1) and `LogAppendTime` topics (the broker stamps them) are not checked.
//!
//! The future bound reads the batch header's max timestamp; the past bound needs every
//! record's (v2 deltas may be negative), so batches are decoded only when the topic sets
//! one (Kafka's default, `Long.MAX_VALUE`, never refuses).

use nagare_core::log::batch;
use nagare_core::TimestampPolicy;

/// Kafka's `RecordBatch.NO_TIMESTAMP`.
const NO_TIMESTAMP: i64 = -1;

/// Why `batch` (whose parsed header is `header`) breaks the topic's timestamp bounds at
/// `now`, if it does.
pub(crate) fn out_of_range(
    batch: &[u8],
    header: &batch::BatchHeader,
    policy: TimestampPolicy,
    now: i64,
) -> Option<String> {
    if policy.log_append_time {
        return None;
    }
    if header.is_control() {
        return None;
    }
    let lower = now.saturating_sub(policy.before_max_ms.max(0));
    let upper = now.saturating_add(policy.after_max_ms.max(0));
    let refuse = |ts: i64| {
        Some(format!(
            "timestamp {ts} is out of range: the topic accepts [{lower}, {upper}] \
             (message.timestamp.before.max.ms / after.max.ms)"
        ))
    };
    if header.max_timestamp != NO_TIMESTAMP && header.max_timestamp > upper {
        return refuse(header.max_timestamp);
    }
    // Timestamps are never below zero but NO_TIMESTAMP: nothing to check down to there.
    if lower <= 0 {
        return None;
    }
    let records = batch::decode_records(batch).ok()?;
    records
        .iter()
        .map(|r| r.timestamp)
        .find(|&ts| ts != NO_TIMESTAMP && (ts < lower || ts > upper))
        .and_then(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use batch::NewRecord;

    const NOW: i64 = 1_700_000_000_000;

    fn policy(before: i64, after: i64) -> TimestampPolicy {
        TimestampPolicy {
            log_append_time: false,
            before_max_ms: before,
            after_max_ms: after,
        }
    }

    fn check(b: &[u8], policy: TimestampPolicy, now: i64) -> Option<String> {
        out_of_range(b, &batch::parse_header(b).unwrap(), policy, now)
    }

    fn batch_at(timestamps: &[i64]) -> bytes::BytesMut {
        let records: Vec<_> = timestamps
            .iter()
            .map(|&timestamp| NewRecord {
                timestamp,
                ..NewRecord::default()
            })
            .collect();
        batch::build_batch(&records)
    }

    #[test]
    fn future_timestamps_past_after_max_are_refused() {
        let p = policy(i64::MAX, 3_600_000);
        assert!(check(&batch_at(&[NOW, NOW + 3_600_000]), p, NOW).is_none());
        assert!(check(&batch_at(&[NOW, NOW + 3_600_001]), p, NOW).is_some());
    }

    #[test]
    fn old_timestamps_past_before_max_are_refused_even_behind_the_first() {
        let p = policy(60_000, 3_600_000);
        assert!(check(&batch_at(&[NOW - 60_000, NOW]), p, NOW).is_none());
        // The first record is fine; a later one (negative delta) is too old.
        assert!(check(&batch_at(&[NOW, NOW - 60_001]), p, NOW).is_some());
        // Kafka's default: no lower bound.
        assert!(check(&batch_at(&[0]), policy(i64::MAX, 3_600_000), NOW).is_none());
    }

    #[test]
    fn no_timestamp_and_log_append_time_are_not_checked() {
        let p = policy(0, 0);
        assert!(check(&batch_at(&[NO_TIMESTAMP]), p, NOW).is_none());
        let stamped = TimestampPolicy {
            log_append_time: true,
            ..p
        };
        assert!(check(&batch_at(&[NOW + 86_400_000]), stamped, NOW).is_none());
    }
}

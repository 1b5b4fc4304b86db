//! Transaction markers in a compaction pass, as Kafka's cleaner treats them
//! (`CleanedTransactionMetadata` and KIP-534's delete horizon).
//!
//! A COMMIT or ABORT marker only matters while records of its transaction are in the
//! log: a read-committed consumer skips an aborted producer's batches until it meets the
//! ABORT marker, and a marker whose data is gone ends nothing. So a marker is removed
//! once
//!
//! 1. no batch of its transaction is left (the pass walks the log from its start, and a
//!    transaction's batches come before its marker, so the pass knows when it reaches
//!    the marker), and then
//! 2. `delete.retention.ms` has passed: the first pass that finds the marker without
//!    data rewrites it with the delete-horizon attribute bit and the horizon (now +
//!    `delete.retention.ms`) as its base timestamp, as Kafka does, and the first pass
//!    after the horizon drops it. A consumer part-way through the transaction's data
//!    when it was removed still meets the marker.
//!
//! Dropping an ABORT marker drops its `.txnindex` entry too (the caller does it): an
//! entry without its marker would make read-committed consumers skip that producer's
//! later transactional batches forever.

use std::collections::HashMap;

use bytes::BytesMut;

use crate::batch::{BatchHeader, Compression, HEADER_LEN};
use crate::batch_layout::pos;
use crate::varint::{get_varint, get_varlong, put_varint, put_varlong};
use crate::BatchError;

/// Attribute bit of a batch whose base timestamp is a delete horizon (KIP-534).
pub(crate) const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The delete horizon of a batch, when it carries one.
pub(crate) fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp)
}

/// Which producers' transactions still have batches in the log, as a pass walks it.
#[derive(Debug, Default)]
pub(crate) struct TxnTracker {
    /// Producer id → a batch of its current transaction was kept.
    has_data: HashMap<i64, bool>,
}

impl TxnTracker {
    /// A transactional data batch of `producer_id` was read; `kept` whether any of its
    /// records are written out.
    pub(crate) fn on_data(&mut self, producer_id: i64, kept: bool) {
        let e = self.has_data.entry(producer_id).or_insert(false);
        *e |= kept;
    }

    /// A marker of `producer_id` ends its transaction: whether data of it was kept.
    pub(crate) fn on_marker(&mut self, producer_id: i64) -> bool {
        self.has_data.remove(&producer_id).unwrap_or(false)
    }
}

/// What to do with a marker whose transaction has no data left.
#[derive(Debug, PartialEq)]
pub(crate) enum Dataless {
    /// Its horizon is still ahead: copy it as it is.
    Keep,
    /// First seen without data: write it with a delete horizon.
    Stamp(BytesMut),
    /// Past its horizon: drop it.
    Remove,
}

/// Decides for a marker (`batch`, uncompressed, whole) whose transaction has no data
/// left, at `now_ms` under `delete_retention_ms`.
pub(crate) fn dataless(
    batch: &[u8],
    h: &BatchHeader,
    now_ms: i64,
    delete_retention_ms: i64,
) -> Result<Dataless, BatchError> {
    Ok(match delete_horizon(h) {
        Some(at) if at <= now_ms => Dataless::Remove,
        Some(_) => Dataless::Keep,
        None => Dataless::Stamp(with_delete_horizon(
            batch,
            h,
            now_ms.saturating_add(delete_retention_ms.max(0)),
        )?),
    })
}

/// `batch` (uncompressed) with the delete-horizon bit set and `horizon` as its base
/// timestamp; every record's timestamp delta is rewritten so record timestamps stay
/// what they were.
pub(crate) fn with_delete_horizon(
    batch: &[u8],
    h: &BatchHeader,
    horizon: i64,
) -> Result<BytesMut, BatchError> {
    if h.compression()? != Compression::None {
        return Err(BatchError::Corrupt(
            "a delete horizon on a compressed batch",
        ));
    }
    let total = h.total_len();
    let body = batch.get(HEADER_LEN..total).ok_or(BatchError::Truncated {
        need: total,
        have: batch.len(),
    })?;
    let corrupt = BatchError::Corrupt;
    let mut out = BytesMut::with_capacity(total + 8 * h.record_count.max(0) as usize);
    out.extend_from_slice(&batch[..HEADER_LEN]);
    let mut at = 0usize;
    let mut rec = Vec::new();
    for _ in 0..h.record_count.max(0) {
        let (len, n) = get_varint(&body[at..])?;
        at += n;
        let end = at
            .checked_add(usize::try_from(len).map_err(|_| corrupt("negative record length"))?)
            .filter(|&e| e <= body.len())
            .ok_or(corrupt("record length overruns batch"))?;
        let attributes = *body.get(at).ok_or(corrupt("record truncated"))?;
        let (delta, n) = get_varlong(body.get(at + 1..end).ok_or(corrupt("record truncated"))?)?;
        let rest = &body[at + 1 + n..end];
        let timestamp = h.base_timestamp.wrapping_add(delta);
        rec.clear();
        rec.push(attributes);
        put_varlong(&mut rec, timestamp.wrapping_sub(horizon));
        rec.extend_from_slice(rest);
        let mut len_buf = Vec::with_capacity(5);
        put_varint(&mut len_buf, rec.len() as i32);
        out.extend_from_slice(&len_buf);
        out.extend_from_slice(&rec);
        at = end;
    }
    let length = (out.len() - crate::batch::LOG_OVERHEAD) as i32;
    out[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let attributes = h.attributes | DELETE_HORIZON_FLAG;
    out[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    out[pos::BASE_TIMESTAMP..pos::BASE_TIMESTAMP + 8].copy_from_slice(&horizon.to_be_bytes());
    let crc = crc32c::crc32c(&out[pos::ATTRIBUTES..]);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{parse_header, validate_stored};
    use crate::control::{build_control_batch, parse_control};

    #[test]
    fn a_stamped_marker_keeps_its_record_and_gets_a_horizon() {
        let mut b = build_control_batch(9, 2, false, 5, 1_000);
        crate::batch::set_base_offset(&mut b, 70);
        let h = parse_header(&b).unwrap();
        assert_eq!(delete_horizon(&h), None);
        assert_eq!(dataless(&b, &h, 10_000, 500).unwrap(), {
            Dataless::Stamp(with_delete_horizon(&b, &h, 10_500).unwrap())
        });
        let s = with_delete_horizon(&b, &h, 10_500).unwrap();
        let sh = validate_stored(&s, usize::MAX).unwrap();
        assert_eq!(delete_horizon(&sh), Some(10_500));
        assert_eq!(
            (
                sh.base_offset,
                sh.producer_id,
                sh.producer_epoch,
                sh.max_timestamp
            ),
            (70, 9, 2, 1_000)
        );
        assert!(sh.is_control() && sh.is_transactional());
        let m = parse_control(&s).unwrap().unwrap();
        assert!(!m.commit);
        assert_eq!(m.coordinator_epoch, 5);
        // The record's own timestamp did not move (delta now negative).
        let body = &s[HEADER_LEN..];
        let (_, n) = get_varint(body).unwrap();
        let (delta, _) = get_varlong(&body[n + 1..]).unwrap();
        assert_eq!(10_500 + delta, 1_000);
        // Before the horizon it stays, at or after it goes.
        assert_eq!(dataless(&s, &sh, 10_499, 500).unwrap(), Dataless::Keep);
        assert_eq!(dataless(&s, &sh, 10_500, 500).unwrap(), Dataless::Remove);
    }

    #[test]
    fn the_tracker_follows_each_producer() {
        let mut t = TxnTracker::default();
        t.on_data(1, false);
        t.on_data(2, true);
        t.on_data(1, true);
        t.on_data(1, false);
        assert!(t.on_marker(1));
        assert!(t.on_marker(2));
        // A new transaction of 1 starts empty; a marker without data seen: none.
        t.on_data(1, false);
        assert!(!t.on_marker(1));
        assert!(!t.on_marker(3));
    }
}

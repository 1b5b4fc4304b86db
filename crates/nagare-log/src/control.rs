//! Transaction markers: the control batches that end a producer's transaction in a
//! partition (COMMIT or ABORT), in Kafka's format.
//!
//! A control batch has the transactional and control attribute bits set, the producer's
//! id and epoch, no sequence (-1) and one record whose key is `[version i16 = 0, type
//! i16]` (0 abort, 1 commit) and whose value is `[version i16 = 0, coordinator epoch
//! i32]`. Consumers never see control records as data: clients skip them and use them to
//! end the filtering of an aborted transaction.

use bytes::{BufMut, BytesMut};

use crate::batch::{self, pos, BatchWriter, HEADER_LEN};
use crate::varint;
use crate::BatchError;

/// Attribute bits of a control batch: transactional (0x10) and control (0x20).
const CONTROL_ATTRIBUTES: i16 = 0x10 | 0x20;
const TYPE_ABORT: i16 = 0;
const TYPE_COMMIT: i16 = 1;

/// What a transaction marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlMarker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Builds the control batch ending `producer_id`'s transaction (base offset 0: the log
/// assigns it).
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> BytesMut {
    let mut key = [0u8; 4];
    let kind = if commit { TYPE_COMMIT } else { TYPE_ABORT };
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut w = BatchWriter::new(32);
    w.push(timestamp, Some(&key), Some(&value), []);
    let mut buf = w.finish();
    {
        let mut h = &mut buf[pos::ATTRIBUTES..pos::ATTRIBUTES + 2];
        h.put_i16(CONTROL_ATTRIBUTES);
        let mut h = &mut buf[pos::PRODUCER_ID..pos::BASE_SEQUENCE + 4];
        h.put_i64(producer_id);
        h.put_i16(producer_epoch);
        h.put_i32(-1);
    }
    let crc = crc32c::crc32c(&buf[pos::ATTRIBUTES..]);
    buf[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// Stamps a built batch (see [`batch::build_batch`]) with a producer's id, epoch and
/// first sequence, transactional or not, and recomputes its CRC: how tests and tools
/// write what an idempotent or transactional producer would.
pub fn set_producer(
    buf: &mut [u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) {
    let attributes = i16::from_be_bytes([buf[pos::ATTRIBUTES], buf[pos::ATTRIBUTES + 1]]);
    let attributes = if transactional {
        attributes | 0x10
    } else {
        attributes & !0x10
    };
    buf[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    buf[pos::PRODUCER_ID..pos::PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    buf[pos::PRODUCER_EPOCH..pos::PRODUCER_EPOCH + 2]
        .copy_from_slice(&producer_epoch.to_be_bytes());
    buf[pos::BASE_SEQUENCE..pos::BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&buf[pos::ATTRIBUTES..]);
    buf[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Reads the marker of a control batch (the whole batch, header included). `Ok(None)`
/// for a batch that is not a control batch, or a control record of another type (Kafka
/// reserves more types; they end nothing).
pub fn parse_control(buf: &[u8]) -> Result<Option<ControlMarker>, BatchError> {
    let header = batch::parse_header(buf)?;
    if !header.is_control() {
        return Ok(None);
    }
    let total = header.total_len().min(buf.len());
    let body = &buf[HEADER_LEN..total];
    let mut at = 0usize;
    let varint = |at: &mut usize| -> Result<i64, BatchError> {
        let (v, n) = varint::get_varlong(body.get(*at..).unwrap_or(&[]))?;
        *at += n;
        Ok(v)
    };
    let _len = varint(&mut at)?;
    at += 1; // record attributes
    let _ts_delta = varint(&mut at)?;
    let _offset_delta = varint(&mut at)?;
    let key_len = varint(&mut at)?;
    if key_len < 4 {
        return Err(BatchError::Corrupt("control record key too short"));
    }
    let key_end = at.saturating_add(key_len as usize);
    let key = body
        .get(at..key_end)
        .ok_or(BatchError::Corrupt("control record truncated"))?;
    at = key_end;
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let value_len = varint(&mut at)?;
    let value_end = at.saturating_add(value_len.max(0) as usize);
    let coordinator_epoch = match body.get(at..value_end) {
        Some(v) if v.len() >= 6 => i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
        _ => -1,
    };
    Ok(match kind {
        TYPE_ABORT => Some(ControlMarker {
            commit: false,
            coordinator_epoch,
        }),
        TYPE_COMMIT => Some(ControlMarker {
            commit: true,
            coordinator_epoch,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trip_and_validates() {
        for commit in [true, false] {
            let b = build_control_batch(42, 7, commit, 3, 1_700_000_000_000);
            let h = batch::validate(&b, 1 << 20).expect("valid batch");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (42, 7, -1)
            );
            assert_eq!(h.record_count, 1);
            assert_eq!(
                parse_control(&b).expect("parses"),
                Some(ControlMarker {
                    commit,
                    coordinator_epoch: 3
                })
            );
            // Control records are not data.
            assert!(batch::decode_records(&b).expect("decodes").is_empty());
        }
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let b = batch::build_batch(&[batch::NewRecord::default()]);
        assert_eq!(parse_control(&b).expect("parses"), None);
    }
}

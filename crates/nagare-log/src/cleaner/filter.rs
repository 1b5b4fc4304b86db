//! Filtering one stored batch record by record, as Kafka's cleaner does: the records a
//! predicate keeps are copied byte for byte (each record carries its own offset and
//! timestamp deltas, so the batch keeps its base offset, base timestamp, last offset
//! delta and producer fields, and offsets stay what they were, holes allowed).
//!
//! A batch that keeps every record is returned untouched (same bytes, same CRC). One
//! that loses some is rebuilt with its original codec at that codec's default level,
//! as Kafka's cleaner does: a compacted topic written compressed stays compressed.

use bytes::{BufMut, BytesMut};

use crate::batch::Compression;
use crate::batch::{self, BatchHeader, HEADER_LEN};
use crate::batch_layout::pos;
use crate::codec;
use crate::recompress::{compress, TargetCodec};
use crate::varint::{get_varint, get_varlong};
use crate::BatchError;

/// What a record looks like to the predicate.
pub(crate) struct RecordView<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    /// The value is null: a tombstone.
    pub tombstone: bool,
}

/// The result of filtering one batch.
pub(crate) enum Filtered {
    /// Every record kept: write the original bytes.
    Unchanged,
    /// Some records kept: write this new batch.
    Rebuilt(BytesMut),
    /// Nothing kept.
    Empty,
}

/// Calls `visit` for every record of `batch` (a whole, stored batch).
pub(crate) fn for_each_record(
    batch: &[u8],
    header: &BatchHeader,
    mut visit: impl FnMut(RecordView<'_>),
) -> Result<(), BatchError> {
    let body = body(batch, header)?;
    walk(&body, header, |view, _| visit(view))
}

/// Filters `batch`, keeping the records `keep` accepts.
pub(crate) fn filter_batch(
    batch: &[u8],
    header: &BatchHeader,
    mut keep: impl FnMut(&RecordView<'_>) -> bool,
) -> Result<Filtered, BatchError> {
    let body = body(batch, header)?;
    let mut kept: Vec<std::ops::Range<usize>> = Vec::new();
    let mut total = 0usize;
    let mut max_ts = i64::MIN;
    walk(&body, header, |view, range| {
        total += 1;
        if keep(&view) {
            max_ts = max_ts.max(view.timestamp);
            kept.push(range);
        }
    })?;
    if kept.len() == total {
        return Ok(Filtered::Unchanged);
    }
    if kept.is_empty() {
        return Ok(Filtered::Empty);
    }
    let len: usize = kept.iter().map(|r| r.len()).sum();
    let codec = header.compression()?;
    let mut out = BytesMut::with_capacity(HEADER_LEN + len);
    out.extend_from_slice(&batch[..HEADER_LEN]);
    if codec == Compression::None {
        for r in &kept {
            out.extend_from_slice(&body[r.clone()]);
        }
    } else {
        let mut records = Vec::with_capacity(len);
        for r in &kept {
            records.extend_from_slice(&body[r.clone()]);
        }
        out.extend_from_slice(&compress(TargetCodec::default_for(codec), &records)?);
    }
    // The codec bits stay as they were: the body is in that codec again.
    let attributes = header.attributes;
    let max_timestamp = if header.is_log_append_time() {
        header.max_timestamp
    } else {
        max_ts
    };
    patch_header(&mut out, attributes, max_timestamp, kept.len() as i32);
    Ok(Filtered::Rebuilt(out))
}

/// A header-only batch covering the same offsets as `header` with no records. Written
/// where a cleaned segment would otherwise end before its last offset, so the next
/// segment still starts right after it (Kafka writes such empty batches too, and
/// clients skip them). It keeps the producer id and sequence (what an idempotent
/// producer's state is rebuilt from) but is neither transactional nor a marker: holding
/// no record, it must not open a transaction when the log is rescanned, nor end one.
pub(crate) fn empty_batch(original: &[u8], header: &BatchHeader) -> BytesMut {
    let mut out = BytesMut::with_capacity(HEADER_LEN);
    out.extend_from_slice(&original[..HEADER_LEN]);
    // Keep only the timestamp type: no codec, transactional, control or horizon bit.
    let attributes = header.attributes & 0x08;
    patch_header(&mut out, attributes, header.max_timestamp, 0);
    out
}

/// Sets the length, attributes, max timestamp and record count of a batch in `buf` and
/// recomputes its CRC.
fn patch_header(buf: &mut BytesMut, attributes: i16, max_timestamp: i64, count: i32) {
    let batch_length = (buf.len() - crate::batch::LOG_OVERHEAD) as i32;
    let mut at = |p: usize, bytes: &[u8]| buf[p..p + bytes.len()].copy_from_slice(bytes);
    at(pos::BATCH_LENGTH, &batch_length.to_be_bytes());
    at(pos::ATTRIBUTES, &attributes.to_be_bytes());
    at(pos::MAX_TIMESTAMP, &max_timestamp.to_be_bytes());
    at(pos::RECORD_COUNT, &count.to_be_bytes());
    let crc = crc32c::crc32c(&buf[pos::ATTRIBUTES..]);
    let mut crc_field = &mut buf[pos::CRC..pos::CRC + 4];
    crc_field.put_u32(crc);
}

/// The records body, decompressed when needed.
fn body<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
) -> Result<std::borrow::Cow<'a, [u8]>, BatchError> {
    let total = header.total_len();
    if total > batch.len() {
        return Err(BatchError::Truncated {
            need: total,
            have: batch.len(),
        });
    }
    let payload = &batch[HEADER_LEN..total];
    Ok(match header.compression()? {
        Compression::None => std::borrow::Cow::Borrowed(payload),
        c => std::borrow::Cow::Owned(codec::decompress(c, payload)?),
    })
}

/// Walks the records of a body, handing each one's view and byte range.
fn walk(
    body: &[u8],
    header: &BatchHeader,
    mut visit: impl FnMut(RecordView<'_>, std::ops::Range<usize>),
) -> Result<(), BatchError> {
    let corrupt = |why| BatchError::Corrupt(why);
    let mut at = 0usize;
    for _ in 0..header.record_count.max(0) {
        let start = at;
        let (len, n) = get_varint(&body[at..])?;
        at += n;
        if len < 0 || len as usize > body.len() - at {
            return Err(corrupt("record length overruns batch"));
        }
        let end = at + len as usize;
        let rec = &body[..end];
        at += 1; // attributes
        let (ts_delta, n) = get_varlong(rec.get(at..).ok_or(corrupt("record truncated"))?)?;
        at += n;
        let (offset_delta, n) = get_varint(rec.get(at..).ok_or(corrupt("record truncated"))?)?;
        at += n;
        let (klen, n) = get_varint(rec.get(at..).ok_or(corrupt("record truncated"))?)?;
        at += n;
        let key = if klen < 0 {
            None
        } else {
            let k = rec
                .get(at..at + klen as usize)
                .ok_or(corrupt("record key overruns record"))?;
            at += klen as usize;
            Some(k)
        };
        let (vlen, _) = get_varint(rec.get(at..).ok_or(corrupt("record truncated"))?)?;
        let timestamp = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(ts_delta)
        };
        visit(
            RecordView {
                offset: header.base_offset + offset_delta as i64,
                timestamp,
                key,
                tombstone: vlen < 0,
            },
            start..end,
        );
        at = end;
    }
    Ok(())
}

/// Reads the header of a stored batch.
pub(crate) fn header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    batch::parse_header(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, decode_records, NewRecord};
    use bytes::Bytes;

    fn rec(key: &str, value: Option<&str>, ts: i64) -> NewRecord {
        NewRecord {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: vec![("h".into(), None)],
            timestamp: ts,
        }
    }

    #[test]
    fn keeps_offsets_and_rebuilds_a_valid_batch() {
        let mut b = build_batch(&[
            rec("a", Some("1"), 10),
            rec("b", None, 20),
            rec("c", Some("3"), 30),
        ]);
        batch::set_base_offset(&mut b, 100);
        let h = header(&b).unwrap();
        let all = filter_batch(&b, &h, |_| true).unwrap();
        assert!(matches!(all, Filtered::Unchanged));
        let none = filter_batch(&b, &h, |_| false).unwrap();
        assert!(matches!(none, Filtered::Empty));
        let Filtered::Rebuilt(out) = filter_batch(&b, &h, |r| r.offset != 101).unwrap() else {
            panic!("expected a rebuilt batch");
        };
        let h2 = header(&out).unwrap();
        assert_eq!(
            (h2.base_offset, h2.last_offset_delta, h2.record_count),
            (100, 2, 2)
        );
        assert_eq!(h2.max_timestamp, 30);
        let recs = decode_records(&out).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![100, 102]
        );
        assert_eq!(recs[1].timestamp, 30);
        assert_eq!(recs[1].value.as_deref(), Some(&b"3"[..]));
        // The CRC is right (recovery checks it).
        assert_eq!(crc32c::crc32c(&out[pos::ATTRIBUTES..]), h2.crc);
        let mut seen = Vec::new();
        for_each_record(&b, &h, |r| {
            seen.push((r.offset, r.key.map(<[u8]>::to_vec), r.tombstone))
        })
        .unwrap();
        assert_eq!(seen[1], (101, Some(b"b".to_vec()), true));
        let e = empty_batch(&b, &h);
        let he = header(&e).unwrap();
        assert_eq!(
            (he.base_offset, he.last_offset(), he.record_count),
            (100, 102, 0)
        );
        assert!(decode_records(&e).unwrap().is_empty());
        // An emptied marker or transactional batch is neither any more (it keeps the
        // producer id and the timestamp type).
        let mut m = crate::control::build_control_batch(4, 1, true, 0, 5);
        crate::control::set_producer(&mut b, 4, 1, 0, true);
        for src in [&mut m, &mut b] {
            let h = header(src).unwrap();
            let eh = header(&empty_batch(src, &h)).unwrap();
            assert!(!eh.is_control() && !eh.is_transactional(), "{eh:?}");
            assert_eq!((eh.producer_id, eh.record_count), (4, 0));
        }
    }

    #[test]
    fn a_compressed_batch_keeps_its_codec() {
        use crate::recompress::recompress;
        let records: Vec<NewRecord> = (0..40)
            .map(|i| rec(&format!("k{}", i % 10), Some("value value value value"), i))
            .collect();
        let plain = build_batch(&records);
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = recompress(&plain, TargetCodec::default_for(codec))
                .unwrap()
                .unwrap();
            batch::set_base_offset(&mut b, 1_000);
            let h = header(&b).unwrap();
            // Keep the last record of each key: offsets 1030..1040.
            let Filtered::Rebuilt(out) = filter_batch(&b, &h, |r| r.offset >= 1_030).unwrap()
            else {
                panic!("expected a rebuilt batch");
            };
            let h2 = batch::validate_stored(&out, usize::MAX).unwrap();
            assert_eq!(h2.compression().unwrap(), codec, "{codec:?}");
            assert_eq!((h2.record_count, h2.last_offset_delta), (10, 39));
            assert_eq!(h2.max_timestamp, 39);
            let recs = decode_records(&out).unwrap();
            assert_eq!(
                recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
                (1_030..1_040).collect::<Vec<_>>()
            );
            assert_eq!(recs[0].timestamp, 30);
            // Smaller than the same records uncompressed would be.
            let mut raw = plain.clone();
            batch::set_base_offset(&mut raw, 1_000);
            let hr = header(&raw).unwrap();
            let Filtered::Rebuilt(raw_out) =
                filter_batch(&raw, &hr, |r| r.offset >= 1_030).unwrap()
            else {
                panic!("expected a rebuilt batch");
            };
            assert_eq!(
                header(&raw_out).unwrap().compression().unwrap(),
                Compression::None
            );
            assert!(
                out.len() < raw_out.len(),
                "{codec:?}: {} >= {}",
                out.len(),
                raw_out.len()
            );
        }
    }
}

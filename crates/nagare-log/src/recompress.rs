//! Re-encoding a record batch with another codec (a topic's `compression.type` that is
//! not `producer`), as Kafka does on append. Only the records section changes: offsets
//! deltas, timestamps, producer id/epoch/sequence, the transactional bit and the record
//! count live in the header and are kept; the attributes' codec bits, the length and
//! the CRC are rewritten.

use std::io::Write;

use bytes::{BufMut, BytesMut};

use crate::batch::{parse_header, Compression};
use crate::batch_layout::{pos, HEADER_LEN, LOG_OVERHEAD};
use crate::codec::decompress;
use crate::reused_codecs;
use crate::BatchError;

/// The codec and level a batch should be stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetCodec {
    pub codec: Compression,
    /// Codec level: gzip -1 (default) or 1-9, zstd -131072..=22; ignored for others.
    pub level: i32,
}

impl TargetCodec {
    /// `codec` at its default level, as Kafka's cleaner re-encodes a batch it filtered
    /// (`Compression.of(type).build()`): gzip's own default, zstd 3; lz4 and snappy
    /// have no level here.
    pub fn default_for(codec: Compression) -> TargetCodec {
        let level = match codec {
            Compression::Zstd => 3,
            _ => -1,
        };
        TargetCodec { codec, level }
    }
}

/// xerial snappy-java's block size and stream header (magic, version 1, compatible 1):
/// the framing Kafka's Java client writes and every client reads.
const XERIAL_BLOCK: usize = 32 * 1024;
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// The batch re-encoded with `target`, or `None` when it already uses that codec or is
/// a control batch (markers are never compressed).
pub fn recompress(batch: &[u8], target: TargetCodec) -> Result<Option<BytesMut>, BatchError> {
    let header = parse_header(batch)?;
    let current = header.compression()?;
    if current == target.codec || header.is_control() {
        return Ok(None);
    }
    let end = header.total_len().min(batch.len());
    if end < HEADER_LEN {
        return Err(BatchError::Truncated {
            need: HEADER_LEN,
            have: end,
        });
    }
    let records = decompress(current, &batch[HEADER_LEN..end])?;
    let body = compress(target, &records)?;
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    out.put_slice(&batch[..HEADER_LEN]);
    out.put_slice(&body);
    let length = (out.len() - LOG_OVERHEAD) as i32;
    out[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let codec_bits = match target.codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    };
    out[pos::ATTRIBUTES + 1] = (out[pos::ATTRIBUTES + 1] & !0x07) | codec_bits;
    let crc = crc32c::crc32c(&out[pos::ATTRIBUTES..]);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(Some(out))
}

/// Stamps a batch with the broker's clock (`message.timestamp.type=LogAppendTime`): the
/// timestamp-type attribute bit and the max timestamp, which readers then report for
/// every record of the batch, with the CRC rewritten. Control batches are left alone.
pub fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) -> Result<(), BatchError> {
    let header = parse_header(batch)?;
    if header.is_control() {
        return Ok(());
    }
    let end = header.total_len().min(batch.len());
    if end < HEADER_LEN {
        return Err(BatchError::Truncated {
            need: HEADER_LEN,
            have: end,
        });
    }
    batch[pos::ATTRIBUTES + 1] |= 0x08;
    batch[pos::MAX_TIMESTAMP..pos::MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[pos::ATTRIBUTES..end]);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Compresses a records section with `target` (the framing every client reads).
pub(crate) fn compress(target: TargetCodec, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let err = |what: &str, e: &dyn std::fmt::Display| {
        BatchError::Decompression(format!("{what} compression failed: {e}"))
    };
    Ok(match target.codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let level = if target.level < 0 {
                flate2::Compression::default()
            } else {
                flate2::Compression::new(target.level.clamp(1, 9) as u32)
            };
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
            enc.write_all(data).map_err(|e| err("gzip", &e))?;
            enc.finish().map_err(|e| err("gzip", &e))?
        }
        Compression::Snappy => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut enc = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK) {
                let block = enc.compress_vec(chunk).map_err(|e| err("snappy", &e))?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lz4 => reused_codecs::lz4_frame(data).map_err(|e| err("lz4", &e))?,
        Compression::Zstd => reused_codecs::zstd_frame(data, target.level.clamp(-131072, 22))
            .map_err(|e| err("zstd", &e))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, decode_records, validate, NewRecord};

    fn sample() -> BytesMut {
        let records: Vec<NewRecord> = (0..50)
            .map(|i| NewRecord {
                key: Some(format!("k{i}").into_bytes().into()),
                value: Some(
                    format!("value number {i} value value value")
                        .into_bytes()
                        .into(),
                ),
                headers: vec![],
                timestamp: 1_700_000_000_000 + i,
            })
            .collect();
        build_batch(&records)
    }

    #[test]
    fn log_append_time_stamps_the_header() {
        let mut b = sample();
        stamp_log_append_time(&mut b, 42).unwrap();
        let h = validate(&b, usize::MAX).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 42);
    }

    #[test]
    fn every_codec_round_trips_and_keeps_the_header() {
        let plain = sample();
        let before = decode_records(&plain).unwrap();
        let h0 = parse_header(&plain).unwrap();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = recompress(&plain, TargetCodec { codec, level: -1 })
                .unwrap()
                .unwrap();
            let h = validate(&packed, usize::MAX).unwrap();
            assert_eq!(h.compression().unwrap(), codec);
            assert_eq!(h.record_count, h0.record_count);
            assert_eq!(h.last_offset_delta, h0.last_offset_delta);
            assert_eq!(h.max_timestamp, h0.max_timestamp);
            assert_eq!(h.producer_id, h0.producer_id);
            assert_eq!(decode_records(&packed).unwrap(), before);
            // And back to another codec and to none.
            let back = recompress(
                &packed,
                TargetCodec {
                    codec: Compression::None,
                    level: 0,
                },
            )
            .unwrap()
            .unwrap();
            assert_eq!(&back[..], &plain[..]);
        }
        assert!(recompress(
            &plain,
            TargetCodec {
                codec: Compression::None,
                level: 0
            }
        )
        .unwrap()
        .is_none());
    }
}

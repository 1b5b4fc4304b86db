//! Kafka record batch v2: parse and validate the header, rewrite the base offset, build
//! batches from plain records (for the STOMP and forward front ends) and decode them back
//! (for STOMP subscribers reading what Kafka producers wrote, compressed or not).
//!
//! Layout (big endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
//! magic i8 (=2), crc u32 (CRC-32C over attributes..end), attributes i16, lastOffsetDelta i32,
//! baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32,
//! recordCount i32, then the records (varint encoded, possibly compressed).

use bytes::{Bytes, BytesMut};

pub(crate) use crate::batch_layout::pos;
pub use crate::batch_layout::{Compression, HEADER_LEN, LOG_OVERHEAD};
use crate::codec;
use crate::varint;
use crate::BatchError;

pub use crate::batch_writer::BatchWriter;

/// The smallest encoding of one record: length, attributes, timestamp delta, offset
/// delta, key length, value length and header count, one byte each. Bounds record
/// counts against the bytes that must hold them.
const MIN_RECORD_LEN: usize = 7;

/// The fixed header of one record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the `batchLength` field; the whole batch is `batch_length + 12` bytes.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Total size in bytes of the batch this header starts.
    pub fn total_len(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn compression(&self) -> Result<Compression, BatchError> {
        match self.attributes & 0x07 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(BatchError::UnsupportedCompression(other as u8)),
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
    /// Timestamp type bit: log append time rather than create time.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Reads the batch length field of the batch at the start of `buf` and returns the total
/// size of that batch, checked to be at least a header. Needs only `LOG_OVERHEAD` bytes.
pub(crate) fn peek_total_len(buf: &[u8]) -> Result<usize, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            need: LOG_OVERHEAD,
            have: buf.len(),
        });
    }
    let len = be_i32(buf, pos::BATCH_LENGTH);
    if len < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Err(BatchError::InvalidLength(len));
    }
    Ok(len as usize + LOG_OVERHEAD)
}

/// Parses the header of the batch at the start of `buf` without checking the CRC.
pub fn parse_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    if buf.len() > pos::MAGIC {
        let magic = buf[pos::MAGIC] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
    }
    if buf.len() < HEADER_LEN {
        return Err(BatchError::Truncated {
            need: HEADER_LEN,
            have: buf.len(),
        });
    }
    let batch_length = be_i32(buf, pos::BATCH_LENGTH);
    if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Err(BatchError::InvalidLength(batch_length));
    }
    Ok(BatchHeader {
        base_offset: be_i64(buf, 0),
        batch_length,
        partition_leader_epoch: be_i32(buf, pos::LEADER_EPOCH),
        magic: buf[pos::MAGIC] as i8,
        crc: be_u32(buf, pos::CRC),
        attributes: be_i16(buf, pos::ATTRIBUTES),
        last_offset_delta: be_i32(buf, pos::LAST_OFFSET_DELTA),
        base_timestamp: be_i64(buf, pos::BASE_TIMESTAMP),
        max_timestamp: be_i64(buf, pos::MAX_TIMESTAMP),
        producer_id: be_i64(buf, pos::PRODUCER_ID),
        producer_epoch: be_i16(buf, pos::PRODUCER_EPOCH),
        base_sequence: be_i32(buf, pos::BASE_SEQUENCE),
        record_count: be_i32(buf, pos::RECORD_COUNT),
    })
}

/// Parses and fully validates one batch that must fill `buf` exactly: magic, length,
/// CRC-32C, record count, offset delta. `max_len` bounds the total size.
pub fn validate(buf: &[u8], max_len: usize) -> Result<BatchHeader, BatchError> {
    validate_with(buf, max_len, true)
}

/// `validate` for a batch already in the log: compaction may have left it with fewer
/// records than its offset range (holes) or none at all (an empty batch keeping the
/// offset range), which a produced batch may not be.
pub(crate) fn validate_stored(buf: &[u8], max_len: usize) -> Result<BatchHeader, BatchError> {
    validate_with(buf, max_len, false)
}

fn validate_with(buf: &[u8], max_len: usize, produced: bool) -> Result<BatchHeader, BatchError> {
    if buf.len() > max_len {
        return Err(BatchError::TooLarge {
            size: buf.len(),
            limit: max_len,
        });
    }
    let header = parse_header(buf)?;
    let total = header.total_len();
    if total > max_len {
        return Err(BatchError::TooLarge {
            size: total,
            limit: max_len,
        });
    }
    if total > buf.len() {
        return Err(BatchError::Truncated {
            need: total,
            have: buf.len(),
        });
    }
    if total < buf.len() {
        return Err(BatchError::InvalidLength(header.batch_length));
    }
    let computed = crc32c::crc32c(&buf[pos::ATTRIBUTES..]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    if produced {
        check_counts(&header)?;
    } else if header.record_count < 0 || header.last_offset_delta < header.record_count - 1 {
        return Err(BatchError::InvalidRecordCount(header.record_count));
    }
    header.compression()?;
    Ok(header)
}

/// Record count and offset delta must agree (Kafka refuses produced batches whose offset
/// range and record count differ), and an uncompressed batch must have room for them.
fn check_counts(header: &BatchHeader) -> Result<(), BatchError> {
    let count = header.record_count;
    if count <= 0 {
        return Err(BatchError::InvalidRecordCount(count));
    }
    if header.last_offset_delta != count - 1 {
        return Err(BatchError::Corrupt(
            "last offset delta does not match record count",
        ));
    }
    if header.attributes & 0x07 == 0
        && (count as usize).saturating_mul(MIN_RECORD_LEN) > header.total_len() - HEADER_LEN
    {
        return Err(BatchError::InvalidRecordCount(count));
    }
    Ok(())
}

/// Rewrites the base offset (the first 8 bytes). The CRC does not cover it.
pub fn set_base_offset(buf: &mut [u8], base_offset: i64) {
    buf[..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Splits a buffer holding consecutive batches (e.g. a Kafka produce `records` field)
/// into whole batches; an incomplete trailing batch is an error.
pub fn split_batches(buf: &[u8]) -> Result<Vec<std::ops::Range<usize>>, BatchError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let rest = &buf[at..];
        let total = peek_total_len(rest)?;
        if total > rest.len() {
            return Err(BatchError::Truncated {
                need: total,
                have: rest.len(),
            });
        }
        out.push(at..at + total);
        at += total;
    }
    Ok(out)
}

/// A record to put into a new batch.
#[derive(Debug, Clone, Default)]
pub struct NewRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
}

/// Builds one uncompressed v2 batch (base offset 0, no producer id) from records.
/// The log assigns the real offset at append.
pub fn build_batch(records: &[NewRecord]) -> BytesMut {
    let body_estimate: usize = records
        .iter()
        .map(|r| {
            24 + r.key.as_ref().map_or(0, |k| k.len())
                + r.value.as_ref().map_or(0, |v| v.len())
                + r.headers
                    .iter()
                    .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, |v| v.len()))
                    .sum::<usize>()
        })
        .sum();
    let mut w = BatchWriter::new(body_estimate);
    for r in records {
        w.push(
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
            r.headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
        );
    }
    w.finish()
}

/// A record decoded from a stored batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Decodes every record of one batch (decompressing as needed). Control batches
/// (transaction markers) decode to no records.
///
/// The CRC is not checked here: batches are validated when appended and when recovered.
pub fn decode_records(batch: &[u8]) -> Result<Vec<Record>, BatchError> {
    let header = parse_header(batch)?;
    let total = header.total_len();
    if total > batch.len() {
        return Err(BatchError::Truncated {
            need: total,
            have: batch.len(),
        });
    }
    if header.is_control() {
        return Ok(Vec::new());
    }
    let count = header.record_count;
    if count < 0 {
        return Err(BatchError::InvalidRecordCount(count));
    }
    let payload = &batch[HEADER_LEN..total];
    let body: Bytes = match header.compression()? {
        Compression::None => Bytes::copy_from_slice(payload),
        c => Bytes::from(codec::decompress(c, payload)?),
    };
    if (count as usize).saturating_mul(MIN_RECORD_LEN) > body.len() {
        return Err(BatchError::InvalidRecordCount(count));
    }
    let mut records = Vec::with_capacity(count as usize);
    let mut cur = Cursor { buf: &body, at: 0 };
    for _ in 0..count {
        records.push(decode_record(&mut cur, &header)?);
    }
    Ok(records)
}

/// A read position in a decoded records body; slices of it share its allocation.
struct Cursor<'a> {
    buf: &'a Bytes,
    at: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> Result<i32, BatchError> {
        let (v, n) = varint::get_varint(&self.buf[self.at..])?;
        self.at += n;
        Ok(v)
    }
    fn varlong(&mut self) -> Result<i64, BatchError> {
        let (v, n) = varint::get_varlong(&self.buf[self.at..])?;
        self.at += n;
        Ok(v)
    }
    fn u8(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or(BatchError::Corrupt("record truncated"))?;
        self.at += 1;
        Ok(b)
    }
    fn take(&mut self, len: usize, end: usize) -> Result<Bytes, BatchError> {
        if len > end.saturating_sub(self.at) {
            return Err(BatchError::Corrupt("record field overruns record"));
        }
        let b = self.buf.slice(self.at..self.at + len);
        self.at += len;
        Ok(b)
    }
    fn opt_bytes(&mut self, end: usize) -> Result<Option<Bytes>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len as usize, end).map(Some)
    }
}

fn decode_record(cur: &mut Cursor<'_>, header: &BatchHeader) -> Result<Record, BatchError> {
    let len = cur.varint()?;
    if len < 0 || len as usize > cur.buf.len() - cur.at {
        return Err(BatchError::Corrupt("record length overruns batch"));
    }
    let end = cur.at + len as usize;
    let _attributes = cur.u8()?;
    let ts_delta = cur.varlong()?;
    let offset_delta = cur.varint()?;
    let key = cur.opt_bytes(end)?;
    let value = cur.opt_bytes(end)?;
    let header_count = cur.varint()?;
    if header_count < 0 || header_count as usize > end.saturating_sub(cur.at) {
        return Err(BatchError::Corrupt("invalid header count"));
    }
    let mut headers = Vec::with_capacity(header_count as usize);
    for _ in 0..header_count {
        let klen = cur.varint()?;
        if klen < 0 {
            return Err(BatchError::Corrupt("null header key"));
        }
        let k = cur.take(klen as usize, end)?;
        let v = cur.opt_bytes(end)?;
        headers.push((String::from_utf8_lossy(&k).into_owned(), v));
    }
    if cur.at > end {
        return Err(BatchError::Corrupt("record overruns its length"));
    }
    // Trailing bytes inside a record are tolerated (forward compatibility).
    cur.at = end;
    let timestamp = if header.is_log_append_time() {
        header.max_timestamp
    } else {
        header.base_timestamp.wrapping_add(ts_delta)
    };
    Ok(Record {
        offset: header.base_offset.wrapping_add(offset_delta as i64),
        timestamp,
        key,
        value,
        headers,
    })
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;

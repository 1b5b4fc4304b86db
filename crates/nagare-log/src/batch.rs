//! Kafka record batch v2: parse and validate the header, rewrite the base offset, build
//! batches from plain records (for the STOMP and forward front ends) and decode them back
//! (for STOMP subscribers reading what Kafka producers wrote, compressed or not).
//!
//! Layout (big endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
//! magic i8 (=2), crc u32 (CRC-32C over attributes..end), attributes i16, lastOffsetDelta i32,
//! baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32,
//! recordCount i32, then the records (varint encoded, possibly compressed).

use bytes::{Bytes, BytesMut};

use crate::BatchError;

/// Size of the fixed batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset + batchLength itself.
pub const LOG_OVERHEAD: usize = 12;

/// Compression codec, from the low 3 bits of the attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

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
        todo!()
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

/// Parses the header of the batch at the start of `buf` without checking the CRC.
pub fn parse_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let _ = buf;
    todo!()
}

/// Parses and fully validates one batch that must fill `buf` exactly: magic, length,
/// CRC-32C, record count, offset delta. `max_len` bounds the total size.
pub fn validate(buf: &[u8], max_len: usize) -> Result<BatchHeader, BatchError> {
    let _ = (buf, max_len);
    todo!()
}

/// Rewrites the base offset (the first 8 bytes). The CRC does not cover it.
pub fn set_base_offset(buf: &mut [u8], base_offset: i64) {
    buf[..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Splits a buffer holding consecutive batches (e.g. a Kafka produce `records` field)
/// into whole batches; an incomplete trailing batch is an error.
pub fn split_batches(buf: &[u8]) -> Result<Vec<std::ops::Range<usize>>, BatchError> {
    let _ = buf;
    todo!()
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
    let _ = records;
    todo!()
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
pub fn decode_records(batch: &[u8]) -> Result<Vec<Record>, BatchError> {
    let _ = batch;
    todo!()
}

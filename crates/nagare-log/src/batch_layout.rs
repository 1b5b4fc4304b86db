//! The fixed layout of a Kafka record batch v2 header: its size, field positions and the
//! compression codec its attributes name. The bottom of the batch modules: `batch`
//! (parsing, validation), `batch_writer` (building) and `codec` (decompression) all use
//! it, and it uses none of them.

/// Size of the fixed batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset + batchLength itself.
pub const LOG_OVERHEAD: usize = 12;

/// Byte positions of the header fields.
pub(crate) mod pos {
    pub(crate) const BATCH_LENGTH: usize = 8;
    pub(crate) const LEADER_EPOCH: usize = 12;
    pub(crate) const MAGIC: usize = 16;
    pub(crate) const CRC: usize = 17;
    pub(crate) const ATTRIBUTES: usize = 21;
    pub(crate) const LAST_OFFSET_DELTA: usize = 23;
    pub(crate) const BASE_TIMESTAMP: usize = 27;
    pub(crate) const MAX_TIMESTAMP: usize = 35;
    pub(crate) const PRODUCER_ID: usize = 43;
    pub(crate) const PRODUCER_EPOCH: usize = 51;
    pub(crate) const BASE_SEQUENCE: usize = 53;
    pub(crate) const RECORD_COUNT: usize = 57;
}

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

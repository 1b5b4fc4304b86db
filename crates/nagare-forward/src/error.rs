use thiserror::Error;

/// Why a request could not be decoded. Every variant closes the connection it came from
/// (with a log line naming the reason); nothing else is affected.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("not MessagePack: reserved byte 0x{byte:02x} at offset {at}")]
    NotMsgpack { byte: u8, at: usize },
    #[error("truncated MessagePack inside a complete value ({0})")]
    Truncated(&'static str),
    #[error("request of at least {size} bytes exceeds max_chunk_bytes {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("decompressed entries exceed max_decompressed_bytes {limit}")]
    DecompressedTooLarge { limit: usize },
    #[error("request holds more than max_events_per_request {limit} events")]
    TooManyEvents { limit: usize },
    #[error("bad compressed entries: {0}")]
    BadCompression(String),
    #[error("unsupported compression {0:?}")]
    UnsupportedCompression(String),
    #[error("wrong shape: {0}")]
    Shape(&'static str),
    #[error("bad event time: {0}")]
    Time(&'static str),
    #[error("record larger than the topic's batch limit ({limit} bytes)")]
    RecordTooLarge { limit: usize },
    #[error("record nested deeper than {0} levels")]
    TooDeep(usize),
}

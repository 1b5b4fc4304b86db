use thiserror::Error;

/// Why a record batch was refused.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    UnsupportedMagic(i8),
    #[error("record batch length {0} is invalid")]
    InvalidLength(i32),
    #[error("record batch too large: {size} bytes, limit {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch has invalid record count {0}")]
    InvalidRecordCount(i32),
    #[error("record batch is corrupt: {0}")]
    Corrupt(&'static str),
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(u8),
    #[error("decompression failed: {0}")]
    Decompression(String),
}

#[derive(Debug, Error)]
pub enum LogError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("offset {offset} is out of range [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    #[error("log is closed")]
    Closed,
    #[error("io error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl LogError {
    /// The I/O error behind a storage failure (a full disk is `ENOSPC`, a failing one
    /// `EIO`, both reachable through `raw_os_error`); `None` for refused input.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            LogError::Io { source, .. } => Some(source),
            _ => None,
        }
    }

    /// True when the disk failed rather than the input: the request may succeed later
    /// (once space is freed) and nothing already acknowledged was affected.
    pub fn is_storage_error(&self) -> bool {
        matches!(self, LogError::Io { .. })
    }
}

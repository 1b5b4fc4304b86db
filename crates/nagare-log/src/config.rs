use std::time::Duration;

use crate::open_files::OpenFiles;
use crate::storage::Storage;

/// When appended bytes are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Page cache only (Kafka's default); the OS writes back when it likes.
    Never,
    /// fsync at most this long after an append.
    Interval(Duration),
    /// fsync before acknowledging every append, with group commit.
    Always,
}

impl std::str::FromStr for FlushPolicy {
    type Err = String;
    /// Parses `never`, `always` or `interval:<ms>`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "never" => Ok(FlushPolicy::Never),
            "always" => Ok(FlushPolicy::Always),
            other => match other.strip_prefix("interval:") {
                Some(ms) => ms
                    .trim()
                    .parse::<u64>()
                    .map(|ms| FlushPolicy::Interval(Duration::from_millis(ms)))
                    .map_err(|e| format!("bad flush interval {ms:?}: {e}")),
                None => Err(format!(
                    "unknown flush policy {other:?} (expected never, always or interval:<ms>)"
                )),
            },
        }
    }
}

impl std::fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlushPolicy::Never => f.write_str("never"),
            FlushPolicy::Always => f.write_str("always"),
            FlushPolicy::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

/// Settings of one partition's log.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Roll to a new segment once the active one reaches this many bytes (default 1 GiB).
    pub segment_bytes: u64,
    /// Roll to a new segment once the active one is this old (default 7 days).
    pub segment_age: Duration,
    /// Add a sparse index entry every this many bytes appended (default 4 KiB).
    pub index_interval_bytes: u32,
    /// Delete whole old segments once the partition is larger than this.
    pub retention_bytes: Option<u64>,
    /// Delete whole old segments whose newest record is older than this.
    pub retention: Option<Duration>,
    /// Largest accepted record batch in bytes.
    pub max_batch_bytes: u32,
    pub flush: FlushPolicy,
    /// The file system the log lives on (the real one unless a test simulates one).
    pub storage: Storage,
    /// The open-file budget this log shares with others (the process-wide one by
    /// default).
    pub open_files: OpenFiles,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_age: Duration::from_secs(7 * 24 * 3600),
            index_interval_bytes: 4096,
            retention_bytes: None,
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            max_batch_bytes: 1024 * 1024 + 12,
            flush: FlushPolicy::Never,
            storage: Storage::default(),
            open_files: OpenFiles::global(),
        }
    }
}

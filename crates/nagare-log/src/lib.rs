//! One partition's log, laid out as Kafka lays it out so a Kafka operator can read it:
//! `DATA/<topic>-<partition>/<base offset, 20 digits>.log` segments, each with a sparse
//! `.index` (relative offset -> file position) and a `.timeindex` (timestamp -> offset).
//!
//! Records are stored as Kafka record batches v2, exactly as the producer sent them after
//! validation and offset assignment, so fetches can be served straight from the file.
//!
//! This crate knows nothing of sockets, protocols or async runtimes: every call is
//! synchronous. One writer at a time per partition (an internal mutex), any number of
//! concurrent readers.

pub mod batch;
mod batch_layout;
mod batch_writer;
pub mod cleaner;
mod clock;
mod codec;
mod config;
pub mod control;
mod error;
mod index;
mod open_files;
mod partition_log;
pub mod recompress;
mod reused_codecs;
mod segment;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod storage;
mod txn_index;
mod varint;

pub use clock::now_ms;
pub use config::{FlushPolicy, LogConfig};
pub use error::{BatchError, LogError};
pub use open_files::{default_budget, OpenFiles};
pub use partition_log::{AppendInfo, FileSlice, PartitionLog, ReadResult};
pub use storage::{FileSystem, OpenMode, RealFs, Storage};
pub use txn_index::AbortedTxnEntry;

//! The broker core: a [`Broker`] owns the data directory and its topics; each topic has
//! partitions backed by a [`nagare_log::PartitionLog`]. Every write goes through one append
//! path, [`Partition::append`] (size limit, idempotent-producer sequence check, group
//! commit, waking readers), and every decoded read through [`Partition::records_from`];
//! the log itself is private to this crate.
//!
//! No wire formats live here: the Kafka, STOMP and forward front ends all speak to this
//! crate, which is what lets each protocol read what the others wrote.
//!
//! # What may block, and where
//!
//! The front ends run on tokio's worker threads, a few of them serving every connection.
//! A call that waits for the disk there stalls every connection on that thread, so:
//!
//! - **Allowed on a runtime thread:** appends and reads that touch only the page cache
//!   (writing a batch into the active segment, reading recent batches, index lookups).
//!   They take microseconds, and handing each one to another thread would cost more than
//!   it saves on the hot path (Kafka does the same: produce writes and fetch reads run on
//!   its request threads; only fsync is deferred).
//! - **Never on a runtime thread:** fsync, creating or removing directories and segment
//!   files, rewriting the topic registry, replaying or rebuilding state from a whole log
//!   (internal-log replay, the producer-sequence rebuild, reading up to 256 MiB), and
//!   anything else that may read more than a few MiB or wait for the device. These run on
//!   the blocking pool (`tokio::task::spawn_blocking`) or a thread of their own.
//! - **How the API says it:** an async core method never blocks: its fsyncs, rebuilds
//!   and compactions run on the blocking pool inside ([`Partition::sync_to`], the
//!   producer-sequence rebuild, queue-state compaction). A synchronous core method that
//!   may block is documented as blocking (`Broker::create_topic`, `delete_topic`,
//!   `create_partitions`, `update_topic_config`, `internal_log`, `Broker::open` and the
//!   `open` of every subsystem) and runs its blocking part through one helper,
//!   `off_runtime`: on a worker thread of the multi-threaded runtime, the worker first
//!   hands its other tasks to another thread (`tokio::task::block_in_place`), so it is
//!   safe to call from a request handler (topic auto-creation from STOMP or forward,
//!   Kafka CreateTopics/DeleteTopics/CreatePartitions); on the blocking pool or a plain
//!   thread it just runs. Startup opens subsystems on the blocking pool.
//! - Queue refills read at most 256 KiB of recent batches under the queue's lock: a
//!   page-cache read in the common case, allowed by the first rule.
//! - Locks held across a wait for the disk are the same hazard one level up: no lock of
//!   the core is held across an fsync except the ones that exist to order fsyncs.

mod blocking;
mod broker;
mod broker_cluster;
mod broker_configs;
mod cleaner;
mod config;
pub mod config_catalog;
mod config_kinds;
mod data_dir_lock;
mod error;
pub mod groups;
pub mod internal_log;
pub mod log_limiter;
mod maintenance;
mod partition;
pub mod producers;
pub mod queues;
pub mod security;
pub mod share_groups;
pub mod store;
mod subsystems;
mod topic;
mod topic_name;
mod topic_store;
mod traffic;
pub mod transactions;
pub mod turn;

pub use broker::Broker;
pub use broker_configs::{BrokerScope, ConfigEntry, ConfigSynonym};
pub use cleaner::CleanerSettings;
pub use config::{BrokerConfig, TopicConfig, TopicFlush, TOPIC_CONFIG_NAMES};
pub use config_kinds::{CleanupPolicy, CompressionType, TimestampType};
pub use data_dir_lock::{DataDirLock, LOCK_FILE};
pub use error::CoreError;
pub use partition::{AbortedTxn, AckLevel, Partition, ProducerStateInfo, RecordsRead};
pub use subsystems::{SubsystemTasks, Subsystems};
pub use topic::{TimestampPolicy, Topic};
pub use topic_name::{sanitize_topic_name, validate_prefixed_topic_name, validate_topic_name};
pub use traffic::{Traffic, TrafficTotals};

pub use nagare_log as log;

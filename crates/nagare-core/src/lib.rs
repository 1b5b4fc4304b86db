//! The broker core: a [`Broker`] owns the data directory and its topics; each topic has
//! partitions backed by a [`nagare_log::PartitionLog`]; appends apply the flush policy
//! (with group commit) and wake long-poll readers.
//!
//! No wire formats live here: the Kafka, STOMP and forward front ends all speak to this
//! crate, which is what lets each protocol read what the others wrote.

mod broker;
mod config;
mod error;
pub mod groups;
mod maintenance;
mod partition;
pub mod producers;
pub mod queues;
mod topic;
mod topic_name;
mod topic_store;

pub use broker::Broker;
pub use config::{BrokerConfig, TopicConfig, TopicFlush};
pub use error::CoreError;
pub use partition::{AckLevel, Partition};
pub use topic::Topic;
pub use topic_name::{sanitize_topic_name, validate_topic_name};

pub use nagare_log as log;

//! Kafka's internal topics `__consumer_offsets` and `__transaction_state`, as Kafka shows
//! them: nagare keeps that state in its own internal logs (`DATA/__nagare_consumer_offsets-0`,
//! `DATA/__nagare_transactions-0`), and once the group / transaction coordinator has opened
//! its log, Metadata and DescribeTopicPartitions list it under Kafka's name with
//! `is_internal = true` and one partition led by this broker. Clients rely on that flag:
//! regex subscriptions skip internal topics (Java's `exclude.internal.topics`, franz-go's
//! regex consumer, librdkafka), and admin tools list them apart.
//!
//! Fetch and ListOffsets serve the log read-only (its records are nagare's own encoding of
//! the coordinator's state, not Kafka's `__consumer_offsets` schema); Produce to them is
//! refused with INVALID_TOPIC_EXCEPTION, as Kafka refuses client writes to its internal
//! topics. ACLs apply to them as to any topic name.

use std::sync::Arc;

use nagare_core::groups::OFFSETS_LOG;
use nagare_core::transactions::TRANSACTIONS_LOG;
use nagare_core::{Broker, Partition};
use uuid::Uuid;

/// (Kafka's name, nagare's internal log) of every internal topic shown.
const INTERNAL_TOPICS: [(&str, &str); 2] = [
    ("__consumer_offsets", OFFSETS_LOG),
    ("__transaction_state", TRANSACTIONS_LOG),
];

/// One internal topic as clients see it: a single partition, index 0.
#[derive(Clone)]
pub(crate) struct InternalTopic {
    pub name: &'static str,
    pub id: Uuid,
    pub partition: Arc<Partition>,
}

/// Whether `name` is one of the internal topics shown (open or not).
pub(crate) fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.iter().any(|(n, _)| *n == name)
}

/// The internal topic called `name`, if its log is open. An ordinary name costs a few
/// string comparisons (Fetch asks for every topic it reads).
pub(crate) fn by_name(broker: &Broker, name: &str) -> Option<InternalTopic> {
    INTERNAL_TOPICS
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|entry| open(broker, entry))
}

/// The internal topic with this id, if its log is open.
pub(crate) fn by_id(broker: &Broker, id: Uuid) -> Option<InternalTopic> {
    INTERNAL_TOPICS
        .iter()
        .find(|(n, _)| topic_id(broker.cluster_id(), n) == id)
        .and_then(|entry| open(broker, entry))
}

/// Every internal topic whose log is open, sorted by name.
pub(crate) fn all(broker: &Broker) -> Vec<InternalTopic> {
    INTERNAL_TOPICS
        .iter()
        .filter_map(|entry| open(broker, entry))
        .collect()
}

/// One entry of [`INTERNAL_TOPICS`], if its log is open.
fn open(broker: &Broker, &(name, log): &(&'static str, &str)) -> Option<InternalTopic> {
    broker
        .open_internal_log(log)
        .map(|partition| InternalTopic {
            name,
            id: topic_id(broker.cluster_id(), name),
            partition,
        })
}

/// A topic id that stays the same across restarts and versions (clients cache topic ids)
/// and differs between clusters, as Kafka's random ones do: FNV-1a of the cluster id and
/// the name, twice with different seeds for 128 bits. Never nil (the "no id" value).
fn topic_id(cluster_id: &str, name: &str) -> Uuid {
    let fnv = |seed: u8| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in [seed]
            .iter()
            .chain(cluster_id.as_bytes())
            .chain(b"/")
            .chain(name.as_bytes())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    let id = (u128::from(fnv(1)) << 64) | u128::from(fnv(2));
    Uuid::from_u128(id.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_ids_are_stable_distinct_and_not_nil() {
        let a = topic_id("cluster-a", "__consumer_offsets");
        assert_eq!(a, topic_id("cluster-a", "__consumer_offsets"));
        assert_ne!(a, topic_id("cluster-b", "__consumer_offsets"));
        assert_ne!(a, topic_id("cluster-a", "__transaction_state"));
        assert!(!a.is_nil());
    }

    #[test]
    fn only_kafkas_two_internal_topics_are_internal() {
        assert!(is_internal("__consumer_offsets"));
        assert!(is_internal("__transaction_state"));
        assert!(!is_internal("__nagare_consumer_offsets"));
        assert!(!is_internal("orders"));
    }
}

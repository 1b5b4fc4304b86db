//! The cluster's topics: listed and described from the metadata of every topic (asking
//! about one topic by name could have the cluster create it, when its
//! `auto.create.topics.enable` is on), created, deleted and grown, and partitions'
//! offsets: all through the admin client, which has no other work (the readers' own
//! connections are busy fetching). Every call blocks, bounded by [`REQUEST_TIMEOUT`].
//!
//! Topics whose names start with `__` are the cluster's internals (`__consumer_offsets`,
//! `__share_group_state`, ...) and nagare's reply topics: never shown to clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nagare_core::store::RemoteTopic;
use nagare_core::CoreError;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::ClientConfig;

use crate::block::wait;
use crate::config::REQUEST_TIMEOUT;
use crate::context::Context;
use crate::error::{core_error, ClusterError};
use crate::health::Health;

/// Whether an admin request failed only because librdkafka dropped the broker handle it
/// was queued on.
fn destroyed_with_its_broker<T>(
    results: &KafkaResult<Vec<Result<T, (String, RDKafkaErrorCode)>>>,
) -> bool {
    match results {
        Err(KafkaError::AdminOp(code)) => *code == RDKafkaErrorCode::DestroyBroker,
        Ok(results) => results
            .iter()
            .any(|r| matches!(r, Err((_, RDKafkaErrorCode::DestroyBroker)))),
        Err(_) => false,
    }
}

/// Name prefix of topics clients never see.
pub(crate) const HIDDEN_PREFIX: &str = "__";

pub(crate) struct Catalog {
    admin: AdminClient<Context>,
}

impl Catalog {
    pub(crate) fn new(config: ClientConfig, health: &Arc<Health>) -> Result<Catalog, ClusterError> {
        let admin = config.create_with_context(Context::new(health, "admin"))?;
        Ok(Catalog { admin })
    }

    /// The partition's first offset and end. Blocking.
    pub(crate) fn watermarks(&self, topic: &str, partition: i32) -> KafkaResult<(i64, i64)> {
        self.admin
            .inner()
            .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
    }

    fn options() -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(REQUEST_TIMEOUT))
            .operation_timeout(Some(REQUEST_TIMEOUT))
    }

    /// Every topic, the hidden ones included, and how many brokers answered.
    pub(crate) fn all_topics(&self) -> Result<(Vec<RemoteTopic>, usize), CoreError> {
        let md = self
            .admin
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        let topics = md
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .map(|t| RemoteTopic {
                name: t.name().to_string(),
                partitions: t.partitions().len() as u32,
            })
            .collect();
        Ok((topics, md.brokers().len()))
    }

    pub(crate) fn list_topics(&self) -> Result<Vec<RemoteTopic>, CoreError> {
        let (mut topics, _) = self.all_topics()?;
        topics.retain(|t| !t.name.starts_with(HIDDEN_PREFIX));
        Ok(topics)
    }

    pub(crate) fn describe_topic(&self, name: &str) -> Result<Option<RemoteTopic>, CoreError> {
        let (topics, _) = self.all_topics()?;
        Ok(topics
            .into_iter()
            .find(|t| t.name == name && t.partitions > 0))
    }

    pub(crate) fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<(), CoreError> {
        let count = i32::try_from(partitions)
            .map_err(|_| CoreError::InvalidPartitions(partitions as i64))?;
        // -1: the cluster's default replication factor.
        let mut topic = NewTopic::new(name, count, TopicReplication::Fixed(-1));
        for (k, v) in configs {
            topic = topic.set(k, v);
        }
        let create = || wait(self.admin.create_topics([&topic], &Self::options()));
        let mut results = create();
        // Right after the cluster comes back, the admin client retires its bootstrap
        // brokers' handles once it learns the real brokers, and a request queued on one
        // fails with `DestroyBroker` although the cluster is fine (seen as a refused first
        // SEND after an outage). Creating again is safe: if the first request got through,
        // the second answers TopicAlreadyExists, which the caller takes as created.
        if destroyed_with_its_broker(&results) {
            results = create();
        }
        let results = results.map_err(|e| core_error(name, &e))?;
        for r in results {
            if let Err((_, code)) = r {
                return Err(core_error(name, &rdkafka::error::KafkaError::AdminOp(code)));
            }
        }
        self.await_topic(name, |t| t.is_some())
    }

    pub(crate) fn delete_topic(&self, name: &str) -> Result<(), CoreError> {
        let results = wait(self.admin.delete_topics(&[name], &Self::options()))
            .map_err(|e| core_error(name, &e))?;
        for r in results {
            if let Err((_, code)) = r {
                return Err(core_error(name, &rdkafka::error::KafkaError::AdminOp(code)));
            }
        }
        Ok(())
    }

    pub(crate) fn create_partitions(&self, name: &str, total: u32) -> Result<(), CoreError> {
        let grow = NewPartitions::new(name, total as usize);
        let results = wait(self.admin.create_partitions([&grow], &Self::options()))
            .map_err(|e| core_error(name, &e))?;
        for r in results {
            if let Err((_, code)) = r {
                return Err(core_error(name, &rdkafka::error::KafkaError::AdminOp(code)));
            }
        }
        self.await_topic(name, |t| t.is_some_and(|t| t.partitions >= total))
    }

    /// Makes share group `group` start at the beginning of its topics when it has no
    /// state yet (`share.auto.offset.reset=earliest`; Kafka's default is the end). The
    /// admin client offers the legacy AlterConfigs only, which replaces every config of
    /// the group, so the group's configs are read first and set again with it. A group
    /// with group-level configs already (which the admin client cannot read back: it does
    /// not know their source) is left as it is: someone configured it on purpose, most
    /// likely a gateway before this one.
    pub(crate) fn start_group_at_beginning(&self, group: &str) -> Result<(), CoreError> {
        const RESET: &str = "share.auto.offset.reset";
        let resource = ResourceSpecifier::Group(group);
        let described = match wait(self.admin.describe_configs([&resource], &Self::options())) {
            Ok(d) => d,
            Err(rdkafka::error::KafkaError::AdminOpCreation(m)) if m.contains("config source") => {
                return Ok(())
            }
            Err(e) => return Err(core_error(group, &e)),
        };
        let current = match described.into_iter().next() {
            Some(Ok(c)) => c,
            Some(Err(code)) => {
                return Err(core_error(
                    group,
                    &rdkafka::error::KafkaError::AdminOp(code),
                ))
            }
            None => {
                return Err(CoreError::Unavailable(format!(
                    "group {group:?}: no configs"
                )))
            }
        };
        if current.get(RESET).and_then(|e| e.value.as_deref()) == Some("earliest") {
            return Ok(());
        }
        let kept: Vec<(String, String)> = current
            .entries
            .iter()
            .filter(|e| !e.is_default && !e.is_read_only && e.name != RESET)
            .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
            .collect();
        let mut alter = AlterConfig::new(ResourceSpecifier::Group(group)).set(RESET, "earliest");
        for (k, v) in &kept {
            alter = alter.set(k, v);
        }
        let results = wait(self.admin.alter_configs([&alter], &Self::options()))
            .map_err(|e| core_error(group, &e))?;
        for r in results {
            if let Err((_, code)) = r {
                return Err(core_error(
                    group,
                    &rdkafka::error::KafkaError::AdminOp(code),
                ));
            }
        }
        tracing::info!(
            group,
            "the queue's share group starts at the beginning of its topic"
        );
        Ok(())
    }

    /// Waits until the metadata shows what an admin request did (the controller
    /// answers before every broker knows), within the request timeout.
    fn await_topic(
        &self,
        name: &str,
        done: impl Fn(Option<&RemoteTopic>) -> bool,
    ) -> Result<(), CoreError> {
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            let t = self.describe_topic(name)?;
            if done(t.as_ref()) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CoreError::Unavailable(format!(
                    "topic {name:?} is not visible in the cluster's metadata yet"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Results = KafkaResult<Vec<Result<String, (String, RDKafkaErrorCode)>>>;

    #[test]
    fn only_a_dropped_broker_handle_is_retried() {
        let destroyed = RDKafkaErrorCode::DestroyBroker;
        let cases: [(Results, bool); 5] = [
            (Err(KafkaError::AdminOp(destroyed)), true),
            (Ok(vec![Err(("t".into(), destroyed))]), true),
            (Ok(vec![Ok("t".into())]), false),
            (
                Ok(vec![Err((
                    "t".into(),
                    RDKafkaErrorCode::TopicAlreadyExists,
                ))]),
                false,
            ),
            (
                Err(KafkaError::AdminOp(
                    RDKafkaErrorCode::BrokerTransportFailure,
                )),
                false,
            ),
        ];
        for (results, retry) in cases {
            assert_eq!(destroyed_with_its_broker(&results), retry, "{results:?}");
        }
    }
}

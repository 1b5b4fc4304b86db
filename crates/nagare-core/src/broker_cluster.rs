//! The broker in cluster mode: its topics are the external cluster's. The topic map is
//! this gateway's view of them: a topic is learned when a front end first asks for it
//! (and created there when auto-creation is on), and the whole list is brought up to
//! date by [`Broker::sync_cluster_topics`], which the maintenance loop runs every few
//! seconds (topics created, grown or deleted by Kafka clients show up that way).
//!
//! A cluster's topic gets this gateway's topic defaults as its settings here (they bound
//! what the front ends batch, `max.message.bytes` first); the cluster applies its own
//! settings to what it stores.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::store::{ClusterCatalog, Readiness, RemoteTopic};
use crate::traffic::TrafficMeter;
use crate::{Broker, CoreError, Partition, Topic, TopicConfig};

impl Broker {
    /// The external cluster, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<dyn ClusterCatalog>> {
        self.cluster.as_ref()
    }

    /// Whether the store can serve clients: always for the embedded log; in cluster
    /// mode, whether the cluster answered its last probe.
    pub fn readiness(&self) -> Readiness {
        match &self.cluster {
            Some(c) => c.readiness(),
            None => Readiness::Ready,
        }
    }

    /// The temp-queue reply router between gateways (cluster mode only).
    pub fn reply_router(&self) -> Option<Arc<dyn crate::store::ReplyRouter>> {
        self.cluster.as_ref().map(|c| c.replies())
    }

    /// Brings the topic map up to date with the cluster's topics: new ones added, grown
    /// ones extended, deleted ones removed. Blocking (one metadata request). Nothing to do
    /// for the embedded log.
    pub fn sync_cluster_topics(&self) -> Result<(), CoreError> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        let listed = cluster.list_topics()?;
        let mut topics = self.topics.write();
        topics.retain(|name, _| listed.iter().any(|t| &t.name == name));
        for remote in listed {
            match topics.get(&remote.name) {
                Some(t) => self.grow_to(cluster, t, remote.partitions),
                None => {
                    let t = self.remote_topic(cluster, &remote);
                    topics.insert(remote.name.clone(), t);
                }
            }
        }
        Ok(())
    }

    /// The topic `name`: known here, or (cluster mode) looked up in the cluster. Never
    /// creates it. Blocking when it asks the cluster.
    pub fn topic_or_learn(&self, name: &str) -> Result<Option<Arc<Topic>>, CoreError> {
        if let Some(t) = self.topic(name) {
            return Ok(Some(t));
        }
        match &self.cluster {
            Some(cluster) => crate::blocking::off_runtime(|| self.learn_topic(cluster, name)),
            None => Ok(None),
        }
    }

    /// The topic `name` as the cluster has it, added to the map; `None` if the cluster
    /// has no such topic. Blocking.
    pub(crate) fn learn_topic(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        name: &str,
    ) -> Result<Option<Arc<Topic>>, CoreError> {
        let Some(remote) = cluster.describe_topic(name)? else {
            return Ok(None);
        };
        let mut topics = self.topics.write();
        if let Some(t) = topics.get(name) {
            return Ok(Some(t.clone()));
        }
        let t = self.remote_topic(cluster, &remote);
        topics.insert(name.to_string(), t.clone());
        Ok(Some(t))
    }

    /// A topic the cluster said exists when it was to be created: learned as soon as
    /// the metadata shows it (within about a second). Blocking.
    pub(crate) fn learn_created_topic(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        name: &str,
    ) -> Result<Arc<Topic>, CoreError> {
        for _ in 0..20 {
            if let Some(t) = self.learn_topic(cluster, name)? {
                return Ok(t);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(CoreError::UnknownTopic(name.to_string()))
    }

    /// Creates the topic in the cluster (its configs: what was set explicitly, the
    /// cluster's defaults for the rest). Blocking.
    pub(crate) fn create_cluster_topic(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        name: &str,
        partitions: Option<u32>,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, CoreError> {
        let count = partitions.unwrap_or(self.config().default_partitions.max(1));
        let configs: Vec<(String, String)> = config
            .overrides
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        cluster.create_topic(name, count, &configs)?;
        let remote = RemoteTopic {
            name: name.to_string(),
            partitions: count,
        };
        let mut topics = self.topics.write();
        let t = match topics.get(name) {
            Some(t) => t.clone(),
            None => {
                let t = self.remote_topic(cluster, &remote);
                topics.insert(name.to_string(), t.clone());
                t
            }
        };
        tracing::info!(topic = name, partitions = count, store = %cluster.location(), "topic created in the cluster");
        Ok(t)
    }

    pub(crate) fn delete_cluster_topic(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        name: &str,
    ) -> Result<(), CoreError> {
        cluster.delete_topic(name)?;
        self.topics.write().remove(name);
        tracing::info!(topic = name, store = %cluster.location(), "topic deleted in the cluster");
        Ok(())
    }

    pub(crate) fn grow_cluster_topic(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        topic: &Arc<Topic>,
        total: u32,
    ) -> Result<(), CoreError> {
        cluster.create_partitions(topic.name(), total)?;
        self.grow_to(cluster, topic, total);
        Ok(())
    }

    fn remote_topic(&self, cluster: &Arc<dyn ClusterCatalog>, remote: &RemoteTopic) -> Arc<Topic> {
        let config = self.topic_defaults();
        let name: Arc<str> = remote.name.as_str().into();
        let partitions = (0..remote.partitions as i32)
            .map(|i| self.remote_partition(cluster, &name, i, &config))
            .collect();
        Arc::new(Topic::new(
            &remote.name,
            topic_id(&remote.name),
            config,
            partitions,
        ))
    }

    fn remote_partition(
        &self,
        cluster: &Arc<dyn ClusterCatalog>,
        topic: &Arc<str>,
        index: i32,
        config: &TopicConfig,
    ) -> Arc<Partition> {
        Arc::new(Partition::remote(
            topic.clone(),
            index,
            cluster.log(topic, index),
            config.max_message_bytes,
            TrafficMeter::for_topic(&self.traffic, topic),
        ))
    }

    /// Runs [`sync_cluster_topics`](Self::sync_cluster_topics) every `every` until `stop`
    /// turns true (returns at once for the embedded log). A failure is logged when it
    /// starts and when it ends, not on every round.
    pub async fn run_cluster_sync(
        self: Arc<Self>,
        every: std::time::Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        if self.cluster.is_none() {
            return;
        }
        let mut failing = false;
        loop {
            let broker = self.clone();
            let done = tokio::task::spawn_blocking(move || broker.sync_cluster_topics()).await;
            match done {
                Ok(Ok(())) if failing => {
                    failing = false;
                    tracing::info!("cluster topics listed again");
                }
                Ok(Err(e)) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot list the cluster's topics");
                }
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() || self.is_closed() {
                return;
            }
        }
    }

    /// Adds the partitions of `topic` up to `total` (a topic never shrinks in Kafka).
    fn grow_to(&self, cluster: &Arc<dyn ClusterCatalog>, topic: &Arc<Topic>, total: u32) {
        let current = topic.partition_count() as u32;
        if total <= current {
            return;
        }
        let config = topic.config();
        let name = topic.name_arc();
        let added: Vec<_> = (current..total)
            .map(|i| self.remote_partition(cluster, &name, i as i32, &config))
            .collect();
        topic.partitions.write().extend(added);
    }
}

/// A topic id every gateway gives the same topic (a hash of its name): the cluster's own
/// topic ids are not read.
fn topic_id(name: &str) -> Uuid {
    let digest = Sha256::digest(format!("nagare-cluster-topic:{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::topic_id;

    #[test]
    fn topic_ids_are_stable_and_distinct() {
        assert_eq!(topic_id("a"), topic_id("a"));
        assert_ne!(topic_id("a"), topic_id("b"));
    }
}

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nagare_log::PartitionLog;
use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::blocking::off_runtime;
use crate::store::ClusterCatalog;
use crate::topic_store::{StoredState, StoredTopic, TopicStore};
use crate::traffic::{Traffic, TrafficMeter};
use crate::{
    validate_topic_name, BrokerConfig, CoreError, DataDirLock, Partition, Topic, TopicConfig,
};

/// Kafka's internal topics: their state lives in nagare's own internal logs, and their
/// names stay unusable for ordinary topics, as in Kafka.
const KAFKA_INTERNAL_TOPICS: [&str; 4] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__cluster_metadata",
];

/// Owns the data directory: the topic registry and every partition log, plus the
/// internal logs other parts of the core keep their state in.
pub struct Broker {
    config: BrokerConfig,
    cluster_id: String,
    pub(crate) topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    internal: Mutex<BTreeMap<String, Arc<Partition>>>,
    /// Serializes topic creation/deletion and the registry file.
    admin: Mutex<(TopicStore, StoredState)>,
    closed: AtomicBool,
    /// Held until [`Broker::shutdown`] has closed every log: no other process opens this
    /// data directory while this one may still write to it.
    lock: Mutex<Option<DataDirLock>>,
    /// Records and bytes in and out since start, every front end together.
    pub(crate) traffic: Arc<Traffic>,
    /// Dynamic broker configs (Kafka AlterConfigs on BROKER), see `broker_configs.rs`.
    pub(crate) dynamic: crate::broker_configs::DynamicConfigs,
    /// Cluster mode: the external cluster holding every topic (`broker_cluster.rs`); the
    /// data directory then holds only the internal logs (users, ACLs, ...).
    pub(crate) cluster: Option<Arc<dyn ClusterCatalog>>,
}

impl Broker {
    /// Opens the data directory, recovering every partition of every known topic. The
    /// directory's lock is taken first, so a directory another process has open is left
    /// untouched.
    pub fn open(config: BrokerConfig) -> Result<Arc<Broker>, CoreError> {
        Self::open_with_store(config, None)
    }

    /// Opens the data directory for a gateway whose topics live in `cluster` (cluster
    /// mode): the lock and the internal logs are local, the topics the cluster's. Topics
    /// of the embedded log in the directory are left alone (and not served). Does not
    /// reach the cluster: its topics are learned on first use and by
    /// [`Broker::sync_cluster_topics`].
    pub fn open_cluster(
        config: BrokerConfig,
        cluster: Arc<dyn ClusterCatalog>,
    ) -> Result<Arc<Broker>, CoreError> {
        Self::open_with_store(config, Some(cluster))
    }

    fn open_with_store(
        config: BrokerConfig,
        cluster: Option<Arc<dyn ClusterCatalog>>,
    ) -> Result<Arc<Broker>, CoreError> {
        let lock = DataDirLock::acquire(&config.data_dir)?;
        let store = TopicStore::new(&config.data_dir)?;
        let mut state = store.load()?;
        if state.cluster_id.is_empty() {
            state.cluster_id = kafka_style_cluster_id(Uuid::new_v4());
            store.save(&state)?;
        }
        let traffic = Arc::new(Traffic::default());
        let dynamic = crate::broker_configs::DynamicConfigs::load(&config.data_dir)?;
        let mut topics = BTreeMap::new();
        if cluster.is_none() {
            for (name, stored) in &state.topics {
                let topic = open_topic(&config, name, stored, &traffic)?;
                topics.insert(name.clone(), Arc::new(topic));
            }
        } else if !state.topics.is_empty() {
            tracing::warn!(
                topics = state.topics.len(),
                data_dir = %config.data_dir.display(),
                "cluster mode: the topics of the embedded log in the data directory are not served"
            );
        }
        tracing::info!(
            data_dir = %config.data_dir.display(),
            topics = topics.len(),
            "broker opened"
        );
        Ok(Arc::new(Broker {
            cluster_id: state.cluster_id.clone(),
            config,
            topics: RwLock::new(topics),
            internal: Mutex::new(BTreeMap::new()),
            admin: Mutex::new((store, state)),
            closed: AtomicBool::new(false),
            lock: Mutex::new(Some(lock)),
            traffic,
            dynamic,
            cluster,
        }))
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// A random id made once per data directory, in Kafka's base64 form.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Cumulative records and bytes in and out of client-visible topics since start.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// The topic, created with the defaults when it does not exist and auto-creation is on.
    /// In cluster mode a topic this gateway has not seen yet is looked up in the cluster
    /// first (blocking, like creation).
    pub fn topic_or_create(&self, name: &str) -> Result<Arc<Topic>, CoreError> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        if let Some(cluster) = &self.cluster {
            if let Some(t) = off_runtime(|| self.learn_topic(cluster, name))? {
                return Ok(t);
            }
        }
        if !self.config.auto_create_topics {
            return Err(CoreError::UnknownTopic(name.to_string()));
        }
        match self.create_topic(name, None, self.topic_defaults()) {
            Ok(t) => Ok(t),
            // Lost a race with another creator: theirs is as good as ours.
            Err(CoreError::TopicExists(_)) => match (self.topic(name), &self.cluster) {
                (Some(t), _) => Ok(t),
                // Another gateway (or task) made it: the metadata may lag a little.
                (None, Some(cluster)) => off_runtime(|| self.learn_created_topic(cluster, name)),
                (None, None) => Err(CoreError::UnknownTopic(name.to_string())),
            },
            Err(e) => Err(e),
        }
    }

    pub fn list_topics(&self) -> Vec<Arc<Topic>> {
        self.topics.read().values().cloned().collect()
    }

    pub fn partition(&self, topic: &str, index: i32) -> Result<Arc<Partition>, CoreError> {
        self.topic(topic)
            .ok_or_else(|| CoreError::UnknownTopic(topic.to_string()))?
            .partition(index)
    }

    /// Checks a creation without doing it (Kafka `validate_only`). Besides the name rules,
    /// refuses the `__nagare` prefix and the names of Kafka's internal topics, which no
    /// client may create or write in Kafka either.
    pub fn validate_new_topic(&self, name: &str, partitions: Option<u32>) -> Result<(), CoreError> {
        validate_topic_name(name)?;
        if name.starts_with("__nagare") {
            return Err(CoreError::InvalidTopicName {
                name: name.to_string(),
                reason: "the __nagare prefix is reserved for internal logs",
            });
        }
        if KAFKA_INTERNAL_TOPICS.contains(&name) {
            return Err(CoreError::InvalidTopicName {
                name: name.to_string(),
                reason: "the name of one of Kafka's internal topics (nagare keeps that state in its own internal logs)",
            });
        }
        if let Some(p) = partitions {
            if p == 0 || p > 100_000 {
                return Err(CoreError::InvalidPartitions(p as i64));
            }
        }
        if self.topics.read().contains_key(name) {
            return Err(CoreError::TopicExists(name.to_string()));
        }
        Ok(())
    }

    /// Creates a topic with `partitions` (default: `default_partitions`) and settings.
    /// Blocking: creates directories and files and fsyncs the registry (safe to call from
    /// async code, see [`off_runtime`]).
    pub fn create_topic(
        &self,
        name: &str,
        partitions: Option<u32>,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, CoreError> {
        off_runtime(|| self.create_topic_now(name, partitions, config))
    }

    fn create_topic_now(
        &self,
        name: &str,
        partitions: Option<u32>,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, CoreError> {
        self.check_open()?;
        let mut admin = self.admin.lock();
        self.validate_new_topic(name, partitions)?;
        if let Some(cluster) = &self.cluster {
            drop(admin);
            return self.create_cluster_topic(cluster, name, partitions, config);
        }
        let stored = StoredTopic {
            id: Uuid::new_v4(),
            partitions: partitions.unwrap_or(self.config.default_partitions.max(1)),
            config,
        };
        let name_arc: Arc<str> = name.into();
        let partitions =
            self.create_partition_logs(&name_arc, 0..stored.partitions, &stored.config)?;
        let (store, state) = &mut *admin;
        state.topics.insert(name.to_string(), stored.clone());
        if let Err(e) = store.save(state) {
            state.topics.remove(name);
            self.remove_created(name, &partitions, &e);
            return Err(e);
        }
        let topic = Arc::new(Topic::new(name, stored.id, stored.config, partitions));
        self.topics.write().insert(name.to_string(), topic.clone());
        tracing::info!(topic = name, partitions = topic.partition_count(), id = %topic.id(), "topic created");
        Ok(topic)
    }

    /// Deletes a topic and its data. Readers holding a partition keep their open files
    /// until they let go. Blocking: removes directories and fsyncs the registry.
    pub fn delete_topic(&self, name: &str) -> Result<(), CoreError> {
        off_runtime(|| self.delete_topic_now(name))
    }

    fn delete_topic_now(&self, name: &str) -> Result<(), CoreError> {
        self.check_open()?;
        if let Some(cluster) = &self.cluster {
            return self.delete_cluster_topic(cluster, name);
        }
        let mut admin = self.admin.lock();
        let topic = self
            .topics
            .write()
            .remove(name)
            .ok_or_else(|| CoreError::UnknownTopic(name.to_string()))?;
        let (store, state) = &mut *admin;
        state.topics.remove(name);
        store.save(state)?;
        for p in topic.partitions() {
            if let Some(log) = p.log() {
                let _ = log.close();
            }
            let dir = partition_dir(&self.config.data_dir, name, p.index());
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove partition directory");
            }
        }
        tracing::info!(topic = name, "topic deleted");
        Ok(())
    }

    /// Grows a topic to `total` partitions (Kafka CreatePartitions). Blocking, like
    /// [`create_topic`](Self::create_topic).
    pub fn create_partitions(
        &self,
        name: &str,
        total: u32,
        validate_only: bool,
    ) -> Result<(), CoreError> {
        off_runtime(|| self.create_partitions_now(name, total, validate_only))
    }

    fn create_partitions_now(
        &self,
        name: &str,
        total: u32,
        validate_only: bool,
    ) -> Result<(), CoreError> {
        self.check_open()?;
        let mut admin = self.admin.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| CoreError::UnknownTopic(name.to_string()))?;
        let current = topic.partition_count() as u32;
        if total <= current || total > 100_000 {
            return Err(CoreError::InvalidPartitions(total as i64));
        }
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = &self.cluster {
            drop(admin);
            return self.grow_cluster_topic(cluster, &topic, total);
        }
        let config = topic.config();
        let added = self.create_partition_logs(&topic.name_arc(), current..total, &config)?;
        let (store, state) = &mut *admin;
        if let Some(t) = state.topics.get_mut(name) {
            t.partitions = total;
        }
        if let Err(e) = store.save(state) {
            if let Some(t) = state.topics.get_mut(name) {
                t.partitions = current;
            }
            self.remove_created(name, &added, &e);
            return Err(e);
        }
        topic.partitions.write().extend(added);
        Ok(())
    }

    /// Creates the logs of partitions `indexes` of topic `name`. All or nothing: when one
    /// fails (disk full, too many files, a name taken by something else), the directories
    /// this call created are removed again and the reason is logged, so a failed
    /// request leaves nothing behind. Directories that existed before are left alone.
    fn create_partition_logs(
        &self,
        name: &Arc<str>,
        indexes: std::ops::Range<u32>,
        config: &TopicConfig,
    ) -> Result<Vec<Arc<Partition>>, CoreError> {
        let mut created = Vec::with_capacity(indexes.len());
        let mut new_dirs = Vec::new();
        for index in indexes {
            let dir = partition_dir(&self.config.data_dir, name, index as i32);
            let existed = dir.exists();
            match open_partition(
                &self.config,
                name.clone(),
                index as i32,
                config,
                TrafficMeter::for_topic(&self.traffic, name),
            ) {
                Ok(p) => {
                    created.push(Arc::new(p));
                    if !existed {
                        new_dirs.push(dir);
                    }
                }
                Err(e) => {
                    tracing::error!(
                        topic = &**name,
                        partition = index,
                        created = created.len(),
                        error = %e,
                        "creating partitions failed; removing the ones created"
                    );
                    drop(created);
                    remove_dirs(&new_dirs);
                    return Err(e);
                }
            }
        }
        Ok(created)
    }

    /// Undoes [`create_partition_logs`](Self::create_partition_logs) after a later step
    /// failed.
    fn remove_created(&self, name: &str, partitions: &[Arc<Partition>], why: &CoreError) {
        tracing::error!(topic = name, error = %why, "storing the topic registry failed; removing the new partitions");
        let dirs: Vec<_> = partitions
            .iter()
            .map(|p| {
                if let Some(log) = p.log() {
                    let _ = log.close();
                }
                partition_dir(&self.config.data_dir, name, p.index())
            })
            .collect();
        remove_dirs(&dirs);
    }

    /// Replaces a topic's settings (Kafka AlterConfigs); applies to open partitions at once
    /// for the flush policy and size limit, to new segments for the rest.
    /// Blocking: fsyncs the registry.
    pub fn update_topic_config(&self, name: &str, config: TopicConfig) -> Result<(), CoreError> {
        off_runtime(|| self.update_topic_config_now(name, config))
    }

    fn update_topic_config_now(&self, name: &str, config: TopicConfig) -> Result<(), CoreError> {
        self.check_open()?;
        if self.cluster.is_some() {
            return Err(CoreError::ClusterMode(
                "changing a topic's configs through a gateway",
            ));
        }
        let mut admin = self.admin.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| CoreError::UnknownTopic(name.to_string()))?;
        for p in topic.partitions() {
            p.set_limits(config.flush, config.max_message_bytes);
            p.set_codec(&config);
            p.set_compacted(config.cleanup_policy.compact());
        }
        *topic.config.write() = config.clone();
        let (store, state) = &mut *admin;
        if let Some(t) = state.topics.get_mut(name) {
            t.config = config;
        }
        store.save(state)
    }

    /// An internal single-partition log at `DATA/__nagare_<name>-0` (committed offsets,
    /// queue state, producer ids). Not listed as a topic; opened once and shared.
    /// Blocking the first time (opens and recovers the log).
    pub fn internal_log(&self, name: &str) -> Result<Arc<Partition>, CoreError> {
        off_runtime(|| self.internal_log_now(name))
    }

    /// The internal log `name` if something has opened it (never opens one): what the
    /// Kafka front end shows as Kafka's internal topics, read-only.
    pub fn open_internal_log(&self, name: &str) -> Option<Arc<Partition>> {
        self.internal.lock().get(name).cloned()
    }

    fn internal_log_now(&self, name: &str) -> Result<Arc<Partition>, CoreError> {
        let mut internal = self.internal.lock();
        if let Some(p) = internal.get(name) {
            return Ok(p.clone());
        }
        let topic = format!("__nagare_{name}");
        validate_topic_name(&topic)?;
        let config = TopicConfig {
            retention_ms: -1,
            max_message_bytes: 64 * 1024 * 1024,
            segment_bytes: 64 * 1024 * 1024,
            ..TopicConfig::default()
        };
        let p = Arc::new(open_partition(
            &self.config,
            topic.into(),
            0,
            &config,
            TrafficMeter::internal(),
        )?);
        internal.insert(name.to_string(), p.clone());
        Ok(p)
    }

    /// Stops appends, fsyncs every log and writes the clean-shutdown markers.
    pub fn shutdown(&self) -> Result<(), CoreError> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut first_err = None;
        for p in self.all_partitions() {
            let Some(log) = p.log() else { continue };
            if let Err(e) = log.close() {
                tracing::error!(topic = p.topic(), partition = p.index(), error = %e, "close failed");
                first_err.get_or_insert(CoreError::from(e));
            }
        }
        if first_err.is_none() {
            // Every log is closed and refuses appends: the directory may have a new owner.
            // After a failed close it stays locked until the process exits.
            self.lock.lock().take();
            tracing::info!("broker closed cleanly");
        }
        first_err.map_or(Ok(()), Err)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn check_open(&self) -> Result<(), CoreError> {
        if self.is_closed() {
            Err(CoreError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Every partition, internal logs included (for maintenance).
    pub(crate) fn all_partitions(&self) -> Vec<Arc<Partition>> {
        let mut v: Vec<_> = self
            .list_topics()
            .into_iter()
            .flat_map(|t| t.partitions())
            .collect();
        v.extend(self.internal.lock().values().cloned());
        v
    }
}

/// `DATA/<topic>-<partition>`, Kafka's layout.
pub(crate) fn partition_dir(data_dir: &Path, topic: &str, index: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{index}"))
}

fn open_topic(
    broker: &BrokerConfig,
    name: &str,
    stored: &StoredTopic,
    traffic: &Arc<Traffic>,
) -> Result<Topic, CoreError> {
    let name_arc: Arc<str> = name.into();
    let partitions = (0..stored.partitions as i32)
        .map(|i| {
            let meter = TrafficMeter::for_topic(traffic, name);
            open_partition(broker, name_arc.clone(), i, &stored.config, meter).map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Topic::new(
        name,
        stored.id,
        stored.config.clone(),
        partitions,
    ))
}

pub(crate) fn open_partition(
    broker: &BrokerConfig,
    topic: Arc<str>,
    index: i32,
    config: &TopicConfig,
    meter: TrafficMeter,
) -> Result<Partition, CoreError> {
    let dir = partition_dir(&broker.data_dir, &topic, index);
    let log = PartitionLog::open(&dir, broker.log_config(config))?;
    let partition = Partition::new(
        topic,
        index,
        log,
        config.flush,
        config.max_message_bytes,
        meter,
    );
    partition.set_codec(config);
    partition.set_compacted(config.cleanup_policy.compact());
    Ok(partition)
}

fn remove_dirs(dirs: &[PathBuf]) {
    for dir in dirs {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove partition directory");
        }
    }
}

/// Kafka prints cluster ids as 22 characters of URL-safe base64 of a UUID.
fn kafka_style_cluster_id(id: Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_is_22_chars_of_base64url() {
        let id = kafka_style_cluster_id(Uuid::new_v4());
        assert_eq!(id.len(), 22);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    }
}

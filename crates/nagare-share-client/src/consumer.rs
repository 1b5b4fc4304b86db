//! What `ShareConsumer` does between its calls: `poll` plans one share fetch per broker
//! leading assigned partitions and runs each as a task of its own (a fetch is never cut
//! off halfway by a caller that stopped waiting, so records the broker acquired for this
//! member are never lost in between: they wait in a buffer for the next poll); a broker's
//! fetches and acknowledgements go one after the other through its share session;
//! acknowledgements ride on the next fetch to the partition's leader, or go alone
//! (ShareAcknowledge) for partitions that fetch does not name, on `flush` and on `close`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use crate::acks::{to_batches, AckRange, PendingAcks, TopicPartition};
use crate::cluster::Cluster;
use crate::config::Settings;
use crate::connection::Conn;
use crate::error::code;
use crate::fetch::{acknowledge_request, fetch_request, read_partition, Limits, PartitionAcks};
use crate::membership::{Health, Membership, View};
use crate::session::{SharePartition, ShareSession, FINAL_EPOCH};
use crate::{ShareError, ShareRecord};

/// One broker's share session and fetch state.
#[derive(Default)]
struct Node {
    /// Held for the whole of a request in the session: they go one at a time.
    session: tokio::sync::Mutex<ShareSession>,
    /// A fetch task runs for this node.
    busy: AtomicBool,
    /// No new fetch before this, after a failure.
    retry_at: Mutex<Option<Instant>>,
    failures: AtomicU32,
    /// Why the latest fetch could not reach the broker; `None` once one did.
    unreachable: Mutex<Option<ShareError>>,
}

pub(crate) struct Shared {
    pub settings: Arc<Settings>,
    pub cluster: Arc<Cluster>,
    pub membership: Arc<Membership>,
    pub group: String,
    pub member_id: String,
    acks: Mutex<PendingAcks>,
    buffer: Mutex<VecDeque<ShareRecord>>,
    nodes: Mutex<HashMap<i32, Arc<Node>>>,
    /// A fetch refused for a reason retrying will not fix, reported once by a poll.
    refused: Mutex<Option<ShareError>>,
    /// Acknowledgements that rode on a fetch and were refused, reported by the next flush
    /// (the caller's acknowledgements may leave with a background fetch before it flushes).
    acks_refused: Mutex<Option<ShareError>>,
    last_refresh: Mutex<Option<Instant>>,
    /// A metadata refresh task runs.
    refreshing: AtomicBool,
    /// Why the last refresh failed.
    metadata_error: Mutex<Option<ShareError>>,
    wake: Notify,
    closed: AtomicBool,
}

/// The share partitions to fetch, per leader node.
type Plan = BTreeMap<i32, BTreeSet<SharePartition>>;

impl Shared {
    pub(crate) fn new(
        settings: Arc<Settings>,
        cluster: Arc<Cluster>,
        membership: Arc<Membership>,
        group: &str,
        member_id: &str,
    ) -> Shared {
        Shared {
            settings,
            cluster,
            membership,
            group: group.to_string(),
            member_id: member_id.to_string(),
            acks: Mutex::new(PendingAcks::default()),
            buffer: Mutex::new(VecDeque::new()),
            nodes: Mutex::new(HashMap::new()),
            refused: Mutex::new(None),
            acks_refused: Mutex::new(None),
            last_refresh: Mutex::new(None),
            refreshing: AtomicBool::new(false),
            metadata_error: Mutex::new(None),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }

    fn node(&self, id: i32) -> Arc<Node> {
        self.nodes.lock().entry(id).or_default().clone()
    }

    pub(crate) fn note_ack(&self, topic: &str, partition: i32, range: AckRange) {
        self.acks.lock().note((Arc::from(topic), partition), range);
    }

    fn take_buffered(&self, max: usize) -> Option<Vec<ShareRecord>> {
        let mut buffer = self.buffer.lock();
        if buffer.is_empty() {
            return None;
        }
        let n = max.min(buffer.len());
        Some(buffer.drain(..n).collect())
    }

    /// The assigned partitions whose topics the metadata names.
    pub(crate) fn assignment(&self, view: &View) -> Vec<SharePartition> {
        view.assigned
            .iter()
            .filter_map(|&(id, partition)| {
                Some(SharePartition {
                    topic: self.cluster.topic_name(id)?,
                    partition,
                    id,
                })
            })
            .collect()
    }

    /// Asks for metadata again when the assignment names topics it lacks or it went
    /// stale (at most once per retry backoff), in a task of its own: a broker slow to
    /// answer never holds a poll past its wait. The error of the last try while there is
    /// no metadata at all to go on.
    fn ensure_metadata(self: &Arc<Self>, view: &View) -> Option<ShareError> {
        let ids = view.assigned.iter().map(|(id, _)| *id);
        let no_metadata = || {
            if self.cluster.has_metadata() {
                None
            } else {
                self.metadata_error.lock().clone()
            }
        };
        if !self.cluster.needs_refresh(ids) {
            return None;
        }
        {
            let mut last = self.last_refresh.lock();
            if last.is_some_and(|t| t.elapsed() < self.settings.backoff)
                || self.refreshing.swap(true, Ordering::AcqRel)
            {
                return no_metadata();
            }
            *last = Some(Instant::now());
        }
        let mut topics: Vec<Arc<str>> = self.membership.topics().to_vec();
        topics.extend(self.acks.lock().partitions().map(|(t, _)| t.clone()));
        topics.sort();
        topics.dedup();
        let me = self.clone();
        tokio::spawn(async move {
            let result = me.cluster.refresh(&topics).await;
            match &result {
                // Acknowledgements of a topic that is gone can never be sent.
                Ok(()) => drop(
                    me.acks
                        .lock()
                        .take(|(t, _)| me.cluster.topic_id(t).is_none()),
                ),
                Err(e) => tracing::debug!(error = %e, "metadata refresh failed"),
            }
            *me.metadata_error.lock() = result.err();
            me.refreshing.store(false, Ordering::Release);
            me.wake.notify_waiters();
        });
        no_metadata()
    }

    /// Which partitions to fetch from which node, plus nodes whose session still names
    /// partitions to forget or that lead partitions with acknowledgements to send.
    fn plan(&self, view: &View) -> Plan {
        let mut plan = Plan::new();
        for sp in self.assignment(view) {
            match self.cluster.leader(&sp.topic, sp.partition) {
                Some(leader) => {
                    plan.entry(leader).or_default().insert(sp);
                }
                None => self.cluster.mark_stale(),
            }
        }
        let acked: Vec<i32> = {
            let acks = self.acks.lock();
            acks.partitions()
                .filter_map(|(t, p)| self.cluster.leader(t, *p))
                .collect()
        };
        let nodes: Vec<(i32, Arc<Node>)> = self
            .nodes
            .lock()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        for (id, node) in nodes {
            if plan.contains_key(&id) {
                continue;
            }
            if let Ok(session) = node.session.try_lock() {
                if session.is_open() && (!session.partitions().is_empty() || acked.contains(&id)) {
                    plan.insert(id, BTreeSet::new());
                }
            }
        }
        plan
    }

    /// Waits for records up to `wait`. What keeps records from coming (the cluster out of
    /// reach, a refusal) is answered as an error once `wait` or the request timeout,
    /// whichever is shorter, has passed with it: promptly, yet never in a burst a caller
    /// polling in a loop would spin on.
    pub(crate) async fn poll(
        self: &Arc<Self>,
        max_records: usize,
        wait: Duration,
    ) -> Result<Vec<ShareRecord>, ShareError> {
        let max = max_records.clamp(1, i32::MAX as usize);
        let started = Instant::now();
        let deadline = started + wait;
        let report_at = started + wait.min(self.settings.request_timeout);
        let mut view_changes = self.membership.subscribe();
        // A fetch refused for good during this poll.
        let mut refused: Option<ShareError> = None;
        loop {
            // Registered before looking, so a fetch finishing in between still wakes us.
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                return Err(ShareError::Closed);
            }
            if let Some(records) = self.take_buffered(max) {
                return Ok(records);
            }
            if let Some(e) = self.refused.lock().take() {
                refused = Some(e);
            }
            let view = view_changes.borrow_and_update().clone();
            let mut trouble = refused.clone();
            if let Health::Failed(e) = &view.health {
                trouble = Some(e.clone());
            }
            if let Some(e) = self.ensure_metadata(&view) {
                trouble.get_or_insert(e);
            }
            let plan = self.plan(&view);
            if plan.is_empty() {
                if let Health::Retrying(e @ ShareError::Unreachable(_)) = &view.health {
                    trouble.get_or_insert(e.clone());
                }
            } else if let Some(e) = self.all_unreachable(&plan) {
                trouble.get_or_insert(e);
            }
            let now = Instant::now();
            let limits = Limits {
                max_wait_ms: deadline
                    .saturating_duration_since(now)
                    .min(self.settings.fetch_wait_max)
                    .as_millis() as i32,
                max_records: max as i32,
                max_bytes: self.settings.fetch_max_bytes,
            };
            let mut wake_at = deadline;
            for (id, wanted) in plan {
                let node = self.node(id);
                if let Some(at) = *node.retry_at.lock() {
                    if at > now {
                        wake_at = wake_at.min(at);
                        continue;
                    }
                }
                if node.busy.swap(true, Ordering::AcqRel) {
                    continue;
                }
                tokio::spawn(self.clone().round(id, node, wanted, limits));
            }
            if let Some(e) = trouble {
                if now >= report_at {
                    return Err(e);
                }
                wake_at = wake_at.min(report_at);
            }
            if now >= deadline {
                return Ok(Vec::new());
            }
            tokio::select! {
                _ = woken => {}
                _ = view_changes.changed() => {}
                _ = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    /// The error of the brokers to fetch from when the latest try of every one of them
    /// failed to reach it (a retry in flight does not hide it: no flapping).
    fn all_unreachable(&self, plan: &Plan) -> Option<ShareError> {
        let mut first = None;
        for id in plan.keys() {
            let e = self.node(*id).unreachable.lock().clone()?;
            first.get_or_insert(e);
        }
        first
    }

    /// One fetch with one node, run as its own task; its outcome decides when the node
    /// is tried again.
    async fn round(
        self: Arc<Self>,
        id: i32,
        node: Arc<Node>,
        wanted: BTreeSet<SharePartition>,
        limits: Limits,
    ) {
        let result = self.fetch(id, &node, wanted, limits).await;
        let now = Instant::now();
        let retry = match result {
            Ok(()) => {
                node.failures.store(0, Ordering::Relaxed);
                *node.unreachable.lock() = None;
                None
            }
            // A new session is opened at once.
            Err(e) if e.kafka_code().is_some_and(code::session_lost) => {
                tracing::debug!(node = id, error = %e, "share session lost; opening a new one");
                None
            }
            Err(e) => {
                let failures = node.failures.fetch_add(1, Ordering::Relaxed);
                let pause = self.settings.backoff_for(failures);
                tracing::debug!(node = id, error = %e, ?pause, "share fetch failed");
                match e {
                    ShareError::Unreachable(_) => *node.unreachable.lock() = Some(e),
                    e if e.is_retriable() => *node.unreachable.lock() = None,
                    e => {
                        tracing::warn!(node = id, error = %e, "share fetch refused");
                        *node.unreachable.lock() = None;
                        *self.refused.lock() = Some(e);
                    }
                }
                Some(now + pause)
            }
        };
        *node.retry_at.lock() = retry;
        node.busy.store(false, Ordering::Release);
        self.wake.notify_waiters();
    }

    /// Takes the pending acknowledgements of the partitions `node` leads.
    fn take_acks_for(&self, node: i32) -> Vec<(TopicPartition, Vec<AckRange>)> {
        self.acks
            .lock()
            .take(|(t, p)| self.cluster.leader(t, *p) == Some(node))
    }

    fn put_back(&self, taken: Vec<(TopicPartition, Vec<AckRange>)>) {
        if !taken.is_empty() {
            self.acks.lock().put_back(taken);
        }
    }

    async fn fetch(
        &self,
        id: i32,
        node: &Node,
        wanted: BTreeSet<SharePartition>,
        limits: Limits,
    ) -> Result<(), ShareError> {
        let mut session = node.session.lock().await;
        let conn = match self.cluster.node(id).await {
            Ok(c) => c,
            Err(e) => {
                session.reset();
                self.cluster.mark_stale();
                return Err(e);
            }
        };
        let v = conn.require(ApiKey::ShareFetch, 1..=1)?;
        let named = |tp: &TopicPartition| {
            wanted
                .iter()
                .find(|sp| sp.topic == tp.0 && sp.partition == tp.1)
                .cloned()
        };
        // Acknowledgements ride on the fetch when it names their partition in an open
        // session; the others go alone first.
        let (ride, alone): (Vec<_>, Vec<_>) = self
            .take_acks_for(id)
            .into_iter()
            .partition(|(tp, _)| session.is_open() && named(tp).is_some());
        if !alone.is_empty() {
            if session.is_open() {
                let epoch = session.epoch();
                if let Err(e) = self.acknowledge(&conn, &mut session, alone, epoch).await {
                    self.put_back(ride);
                    return Err(e);
                }
            } else {
                self.put_back(alone);
            }
        }
        let step = session.step(&wanted);
        if wanted.is_empty() && step.forget.is_empty() && ride.is_empty() {
            return Ok(());
        }
        let ride_acks: Vec<PartitionAcks> = ride
            .iter()
            .filter_map(|(tp, ranges)| Some((named(tp)?, to_batches(ranges))))
            .collect();
        let limits = Limits {
            max_wait_ms: if wanted.is_empty() {
                0
            } else {
                limits.max_wait_ms
            },
            ..limits
        };
        let req = fetch_request(&self.group, &self.member_id, &step, &ride_acks, limits);
        let wait = Duration::from_millis(limits.max_wait_ms.max(0) as u64);
        let resp = match conn.request(&req, v, wait).await {
            Ok(r) => r,
            Err(e) => {
                session.reset();
                self.put_back(ride);
                return Err(e);
            }
        };
        if resp.error_code != code::NONE {
            session.reset();
            self.put_back(ride);
            return Err(ShareError::kafka(
                resp.error_code,
                resp.error_message.as_ref(),
            ));
        }
        session.fetched(wanted.clone());
        drop(session);
        let names: HashMap<Uuid, Arc<str>> = wanted
            .iter()
            .chain(ride_acks.iter().map(|(sp, _)| sp))
            .map(|sp| (sp.id, sp.topic.clone()))
            .collect();
        let mut records = Vec::new();
        let mut failed = None;
        for t in &resp.responses {
            let Some(topic) = names.get(&t.topic_id) else {
                tracing::debug!(topic_id = %t.topic_id, "share fetch answered a topic not asked for");
                continue;
            };
            for p in &t.partitions {
                if p.error_code != code::NONE {
                    let e = ShareError::kafka(p.error_code, p.error_message.as_ref());
                    if code::needs_metadata(p.error_code) {
                        self.cluster.mark_stale();
                    } else if !e.is_retriable() {
                        failed = Some(e.clone());
                    }
                    tracing::debug!(%topic, partition = p.partition_index, error = %e, "share fetch partition error");
                }
                if p.acknowledge_error_code != code::NONE {
                    let e = ShareError::kafka(
                        p.acknowledge_error_code,
                        p.acknowledge_error_message.as_ref(),
                    );
                    tracing::warn!(%topic, partition = p.partition_index, error = %e, "acknowledgements refused");
                    self.acks_refused.lock().get_or_insert(e);
                }
                let fetched = read_partition(
                    topic,
                    p.partition_index,
                    p.records.as_ref(),
                    &p.acquired_records,
                );
                for range in fetched.settle {
                    self.note_ack(topic, p.partition_index, range);
                }
                records.extend(fetched.records);
            }
        }
        if !records.is_empty() {
            self.buffer.lock().extend(records);
        }
        failed.map_or(Ok(()), Err)
    }

    /// Sends `taken` in a ShareAcknowledge at `epoch` (-1 closes the session). `Ok(Some)`
    /// when delivered but refused for some partition (e.g. its lock had run out).
    async fn acknowledge(
        &self,
        conn: &Conn,
        session: &mut ShareSession,
        taken: Vec<(TopicPartition, Vec<AckRange>)>,
        epoch: i32,
    ) -> Result<Option<ShareError>, ShareError> {
        let v = conn.require(ApiKey::ShareAcknowledge, 1..=1)?;
        let (known, unknown): (Vec<_>, Vec<_>) = taken
            .into_iter()
            .partition(|(tp, _)| self.cluster.topic_id(&tp.0).is_some());
        self.put_back(unknown);
        let acks: Vec<PartitionAcks> = known
            .iter()
            .filter_map(|(tp, ranges)| {
                let sp = SharePartition {
                    topic: tp.0.clone(),
                    partition: tp.1,
                    id: self.cluster.topic_id(&tp.0)?,
                };
                Some((sp, to_batches(ranges)))
            })
            .collect();
        let req = acknowledge_request(&self.group, &self.member_id, epoch, &acks);
        let resp = match conn.request(&req, v, Duration::ZERO).await {
            Ok(r) => r,
            Err(e) => {
                session.reset();
                self.put_back(known);
                return Err(e);
            }
        };
        if resp.error_code != code::NONE {
            session.reset();
            self.put_back(known);
            return Err(ShareError::kafka(
                resp.error_code,
                resp.error_message.as_ref(),
            ));
        }
        if epoch == FINAL_EPOCH {
            session.reset();
        } else {
            session.acknowledged();
        }
        let mut refused = None;
        for t in &resp.responses {
            for p in &t.partitions {
                if p.error_code != code::NONE {
                    if code::needs_metadata(p.error_code) {
                        self.cluster.mark_stale();
                    }
                    let e = ShareError::kafka(p.error_code, p.error_message.as_ref());
                    tracing::warn!(partition = p.partition_index, error = %e, "acknowledgements refused");
                    refused.get_or_insert(e);
                }
            }
        }
        Ok(refused)
    }

    /// Sends every pending acknowledgement whose partition's leader has an open session,
    /// one ShareAcknowledge per broker, all brokers at once.
    pub(crate) async fn flush(self: &Arc<Self>) -> Result<(), ShareError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ShareError::Closed);
        }
        let unled = {
            let acks = self.acks.lock();
            let mut topics: Vec<Arc<str>> = acks
                .partitions()
                .filter(|(t, p)| self.cluster.leader(t, *p).is_none())
                .map(|(t, _)| t.clone())
                .collect();
            topics.sort();
            topics.dedup();
            topics
        };
        if !unled.is_empty() {
            self.cluster.mark_stale();
            self.cluster.refresh(&unled).await?;
        }
        // Every node with a session too: a fetch in flight there may carry some of the
        // acknowledgements, and its answer is waited for (the session lock).
        let leaders: BTreeSet<i32> = {
            let acks = self.acks.lock();
            acks.partitions()
                .filter_map(|(t, p)| self.cluster.leader(t, *p))
                .chain(self.nodes.lock().keys().copied())
                .collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        for id in leaders {
            let me = self.clone();
            tasks.spawn(async move { me.flush_node(id, None).await });
        }
        let mut first = None;
        while let Some(done) = tasks.join_next().await {
            if let Ok(Err(e)) = done {
                first.get_or_insert(e);
            }
        }
        // Each node's session lock was taken above, so a fetch that carried some of the
        // acknowledgements has been answered by now.
        if let Some(e) = self.acks_refused.lock().take() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// Sends `node`'s pending acknowledgements in its session, at the session's epoch or
    /// at `epoch` (-1 to close it). Without an open session they stay pending (closing:
    /// there is nothing to close).
    async fn flush_node(&self, id: i32, epoch: Option<i32>) -> Result<(), ShareError> {
        let node = self.node(id);
        let mut session = node.session.lock().await;
        if !session.is_open() {
            return Ok(());
        }
        let conn = match self.cluster.node(id).await {
            Ok(c) => c,
            Err(e) => {
                session.reset();
                return Err(e);
            }
        };
        let taken = self.take_acks_for(id);
        if taken.is_empty() && epoch.is_none() {
            return Ok(());
        }
        let epoch = epoch.unwrap_or(session.epoch());
        match self.acknowledge(&conn, &mut session, taken, epoch).await? {
            None => Ok(()),
            Some(refused) => Err(refused),
        }
    }

    /// Closes every share session (acknowledging what is pending; what this member still
    /// holds goes back to the group at once), then leaves the group.
    pub(crate) async fn close(self: &Arc<Self>) -> Result<(), ShareError> {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_waiters();
        let ids: Vec<i32> = self.nodes.lock().keys().copied().collect();
        let mut tasks = tokio::task::JoinSet::new();
        for id in ids {
            let me = self.clone();
            tasks.spawn(async move { me.flush_node(id, Some(FINAL_EPOCH)).await });
        }
        let mut first = None;
        while let Some(done) = tasks.join_next().await {
            if let Ok(Err(e)) = done {
                first.get_or_insert(e);
            }
        }
        let dropped = std::mem::take(&mut *self.acks.lock());
        if !dropped.is_empty() {
            tracing::debug!("closing with acknowledgements for brokers without a session; their locks run out instead");
        }
        self.membership.leave().await;
        first.map_or(Ok(()), Err)
    }
}

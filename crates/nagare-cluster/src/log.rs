//! One partition of the cluster as the core sees it ([`RemoteLog`]): appends through
//! the gateway's producer, reads from the partition's window (filled by the tail reader
//! while someone reads here) or, behind it, from the catch-up reader, and the end-offset
//! watch that wakes the partition's readers.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use nagare_core::log::batch::{NewRecord, Record};
use nagare_core::log::{now_ms, AppendInfo};
use nagare_core::store::{Bounds, BoxFuture, RemoteLog};
use nagare_core::{CoreError, RecordsRead};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::tail::Follower;
use crate::window::{Lookup, Window, WINDOW_BYTES, WINDOW_RECORDS};
use crate::Clients;

/// A partition read here in the last this many ms stays followed even while nobody
/// waits on it (between the reads of an HTTP browser, say).
const KEEP_FOLLOWING_MS: i64 = 30_000;
/// After a failed read from the cluster, readers are woken to try again after this.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct KafkaLog {
    topic: Arc<str>,
    partition: i32,
    clients: Arc<Clients>,
    window: Mutex<Window>,
    /// The offsets as last seen (the end also moves with the window).
    seen: Mutex<Bounds>,
    end: watch::Sender<i64>,
    following: AtomicBool,
    /// Serializes starting to follow.
    start_lock: tokio::sync::Mutex<()>,
    last_read_ms: AtomicI64,
    /// Set while reads from the cluster fail (one log line per failure, not per read).
    failing: AtomicBool,
    me: Weak<KafkaLog>,
}

impl KafkaLog {
    pub(crate) fn new(topic: &str, partition: i32, clients: Arc<Clients>) -> Arc<KafkaLog> {
        Arc::new_cyclic(|me| KafkaLog {
            topic: topic.into(),
            partition,
            clients,
            window: Mutex::new(Window::new(0, WINDOW_BYTES, WINDOW_RECORDS)),
            seen: Mutex::new(Bounds::default()),
            end: watch::channel(0).0,
            following: AtomicBool::new(false),
            start_lock: tokio::sync::Mutex::new(()),
            last_read_ms: AtomicI64::new(now_ms()),
            failing: AtomicBool::new(false),
            me: me.clone(),
        })
    }

    fn touch(&self) {
        self.last_read_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Asks the cluster for the offsets and, the first time, starts following the
    /// partition from its end.
    async fn refresh(&self) -> Result<Bounds, CoreError> {
        self.touch();
        if self.following.load(Ordering::SeqCst) {
            return Ok(self.cached());
        }
        let _starting = self.start_lock.lock().await;
        if self.following.load(Ordering::SeqCst) {
            return Ok(self.cached());
        }
        self.clients
            .health
            .check()
            .map_err(CoreError::Unavailable)?;
        let clients = self.clients.clone();
        let (topic, partition) = (self.topic.clone(), self.partition);
        let (start, end) =
            tokio::task::spawn_blocking(move || clients.catalog.watermarks(&topic, partition))
                .await
                .map_err(|_| CoreError::ShuttingDown)?
                .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        *self.seen.lock() = Bounds { start, end };
        self.window.lock().reset(end);
        let me: Weak<dyn Follower> = self.me.clone();
        self.clients
            .tail
            .follow(&self.topic, self.partition, end, me)
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        self.following.store(true, Ordering::SeqCst);
        self.end.send_replace(end);
        Ok(Bounds { start, end })
    }

    fn cached(&self) -> Bounds {
        let seen = *self.seen.lock();
        if self.following.load(Ordering::SeqCst) {
            Bounds {
                start: seen.start,
                end: seen.end.max(self.window.lock().end()),
            }
        } else {
            seen
        }
    }

    /// Wakes the readers after a while, to retry what just failed.
    fn retry_later(&self) {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(RETRY_AFTER).await;
            if let Some(log) = me.upgrade() {
                log.end.send_modify(|_| {});
            }
        });
    }

    async fn read_now(&self, offset: i64, max_bytes: u64) -> Result<RecordsRead, CoreError> {
        if !self.following.load(Ordering::SeqCst) {
            self.refresh().await?;
        }
        self.touch();
        let lookup = self.window.lock().read(offset, max_bytes);
        match lookup {
            Lookup::Hit(read) => Ok(read),
            Lookup::Ahead => Ok(empty(offset)),
            Lookup::Behind => {
                let found = self
                    .clients
                    .history
                    .read(&self.topic, self.partition, offset, max_bytes)
                    .await;
                match found {
                    Ok(f) => {
                        if self.failing.swap(false, Ordering::Relaxed) {
                            tracing::info!(topic = %self.topic, partition = self.partition, "reading from the cluster again");
                        }
                        if f.read.records.is_empty() && !f.at_end {
                            self.retry_later();
                        }
                        Ok(f.read)
                    }
                    Err(e) => {
                        if !self.failing.swap(true, Ordering::Relaxed) {
                            tracing::warn!(topic = %self.topic, partition = self.partition, error = %e, "reading from the cluster failed; retrying");
                        }
                        self.retry_later();
                        Ok(empty(offset))
                    }
                }
            }
        }
    }
}

fn empty(offset: i64) -> RecordsRead {
    RecordsRead {
        records: Vec::new(),
        next_offset: offset,
        batch_ends: Vec::new(),
    }
}

impl RemoteLog for KafkaLog {
    fn append<'a>(
        &'a self,
        records: &'a [NewRecord],
    ) -> BoxFuture<'a, Result<AppendInfo, CoreError>> {
        Box::pin(async move {
            let info = self
                .clients
                .producer
                .send(&self.topic, Some(self.partition), records)
                .await?;
            if info.last_offset >= 0 {
                let mut seen = self.seen.lock();
                seen.end = seen.end.max(info.last_offset + 1);
            }
            Ok(info)
        })
    }

    fn read(&self, offset: i64, max_bytes: u64) -> BoxFuture<'_, Result<RecordsRead, CoreError>> {
        Box::pin(self.read_now(offset, max_bytes))
    }

    fn read_window(&self, offset: i64, max_bytes: u64) -> RecordsRead {
        self.touch();
        match self.window.lock().read(offset, max_bytes) {
            Lookup::Hit(read) => read,
            Lookup::Ahead | Lookup::Behind => empty(offset),
        }
    }

    fn bounds(&self) -> BoxFuture<'_, Result<Bounds, CoreError>> {
        Box::pin(self.refresh())
    }

    fn cached_bounds(&self) -> Bounds {
        self.cached()
    }

    fn watch(&self) -> watch::Receiver<i64> {
        self.touch();
        self.end.subscribe()
    }
}

impl Follower for KafkaLog {
    fn push(&self, record: Record) {
        self.window.lock().push(record);
    }

    fn publish(&self) {
        let end = self.window.lock().end();
        {
            let mut seen = self.seen.lock();
            seen.end = seen.end.max(end);
        }
        self.end.send_if_modified(|e| {
            let moved = *e != end;
            *e = end;
            moved
        });
    }

    fn wanted(&self) -> bool {
        let wanted = self.end.receiver_count() > 0
            || now_ms() - self.last_read_ms.load(Ordering::Relaxed) < KEEP_FOLLOWING_MS;
        if !wanted {
            // Let go of the window; the next reader starts following again.
            self.following.store(false, Ordering::SeqCst);
            let mut window = self.window.lock();
            let end = window.end();
            window.reset(end);
        }
        wanted
    }
}

//! The periodic work of the broker: interval flushes, segment rolls by age and retention.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::{Broker, TopicFlush};

impl Broker {
    /// Runs until `stop` turns true. Interval-flushed topics are checked at their own pace
    /// (the shortest interval, at least every 10 ms); retention and rolls every
    /// `maintenance_interval`.
    pub async fn run_maintenance(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut last_retention = tokio::time::Instant::now();
        loop {
            let tick = self
                .shortest_flush_interval()
                .unwrap_or(self.config().maintenance_interval);
            tokio::select! {
                _ = tokio::time::sleep(tick.max(Duration::from_millis(10))) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() || self.is_closed() {
                return;
            }
            let broker = self.clone();
            let do_retention = last_retention.elapsed() >= self.config().maintenance_interval;
            if do_retention {
                last_retention = tokio::time::Instant::now();
            }
            let _ = tokio::task::spawn_blocking(move || broker.maintain_once(do_retention)).await;
        }
    }

    fn shortest_flush_interval(&self) -> Option<Duration> {
        self.list_topics()
            .iter()
            .filter_map(|t| match t.config().flush {
                TopicFlush::Interval(ms) => Some(Duration::from_millis(ms)),
                _ => None,
            })
            .min()
    }

    /// One pass: flush interval topics whose unflushed data is there, and when asked,
    /// roll old segments and apply retention.
    pub fn maintain_once(&self, retention: bool) {
        let now_ms = nagare_log::now_ms();
        for p in self.all_partitions() {
            // A cluster's partitions are the cluster's to flush and expire.
            let Some(log) = p.log() else { continue };
            if matches!(p.flush_policy(), TopicFlush::Interval(_))
                && log.flushed_offset() < log.log_end_offset()
            {
                if let Err(e) = log.flush() {
                    tracing::error!(topic = p.topic(), partition = p.index(), error = %e, "interval flush failed");
                }
            }
            if retention {
                if let Err(e) = log.maybe_roll() {
                    tracing::error!(topic = p.topic(), partition = p.index(), error = %e, "segment roll failed");
                }
                match p.apply_retention(now_ms) {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(
                            topic = p.topic(),
                            partition = p.index(),
                            segments = n,
                            "retention deleted segments"
                        );
                        p.publish_end_offset();
                    }
                    Err(e) => {
                        tracing::error!(topic = p.topic(), partition = p.index(), error = %e, "retention failed")
                    }
                }
            }
        }
    }
}

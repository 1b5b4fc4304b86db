//! Cumulative traffic totals of the broker (records and bytes in and out, every front end
//! together) and the per-topic Prometheus counters that go with them.
//!
//! "In" is counted once, on the one append path (`Partition::append_*`), so every
//! front end is covered; internal logs are not client traffic and count nowhere. "Out"
//! is what a front end hands to a client (a Kafka fetch, a STOMP MESSAGE); it reports
//! that through [`Partition::count_out`](crate::Partition::count_out). The totals are
//! plain atomics, read by `/status` and by clients computing rates from two samples.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metrics::Counter;

/// The broker-wide totals since start, see [`Broker::traffic`](crate::Broker::traffic).
#[derive(Debug, Default)]
pub struct Traffic {
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    records_in: AtomicU64,
    records_out: AtomicU64,
}

/// One reading of [`Traffic`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TrafficTotals {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub records_in: u64,
    pub records_out: u64,
}

impl Traffic {
    pub fn totals(&self) -> TrafficTotals {
        // Relaxed: four independent monotonic counters; no reader needs them consistent
        // with each other to the byte.
        TrafficTotals {
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_in(&self, records: u64, bytes: u64) {
        self.records_in.fetch_add(records, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts what went out without a partition at hand (the totals only).
    pub fn count_out(&self, records: u64, bytes: u64) {
        self.records_out.fetch_add(records, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// What one partition counts into: the broker's totals and its topic's Prometheus
/// counters, whose handles are looked up once per partition open (not per record).
pub(crate) struct TrafficMeter {
    totals: Arc<Traffic>,
    records_in: Counter,
    bytes_in: Counter,
    records_out: Counter,
    bytes_out: Counter,
}

impl TrafficMeter {
    /// The meter of a partition of `topic`.
    pub(crate) fn for_topic(totals: &Arc<Traffic>, topic: &str) -> TrafficMeter {
        let t = topic.to_string();
        TrafficMeter {
            totals: totals.clone(),
            records_in: metrics::counter!("nagare_topic_records_in_total", "topic" => t.clone()),
            bytes_in: metrics::counter!("nagare_topic_bytes_in_total", "topic" => t.clone()),
            records_out: metrics::counter!("nagare_topic_records_out_total", "topic" => t.clone()),
            bytes_out: metrics::counter!("nagare_topic_bytes_out_total", "topic" => t),
        }
    }

    /// An internal log's meter: counts nowhere anybody reads.
    pub(crate) fn internal() -> TrafficMeter {
        TrafficMeter {
            totals: Arc::default(),
            records_in: Counter::noop(),
            bytes_in: Counter::noop(),
            records_out: Counter::noop(),
            bytes_out: Counter::noop(),
        }
    }

    pub(crate) fn count_in(&self, records: u64, bytes: u64) {
        self.totals.count_in(records, bytes);
        self.records_in.increment(records);
        self.bytes_in.increment(bytes);
    }

    pub(crate) fn count_out(&self, records: u64, bytes: u64) {
        self.totals.count_out(records, bytes);
        self.records_out.increment(records);
        self.bytes_out.increment(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_across_meters() {
        let totals = Arc::new(Traffic::default());
        let a = TrafficMeter::for_topic(&totals, "a");
        let b = TrafficMeter::for_topic(&totals, "b");
        a.count_in(3, 300);
        b.count_in(1, 50);
        a.count_out(2, 200);
        totals.count_out(1, 10);
        assert_eq!(
            totals.totals(),
            TrafficTotals {
                bytes_in: 350,
                bytes_out: 210,
                records_in: 4,
                records_out: 3,
            }
        );
    }

    #[test]
    fn internal_meter_counts_nowhere_shared() {
        let m = TrafficMeter::internal();
        m.count_in(5, 5);
        assert_eq!(m.totals.totals().records_in, 5);
    }
}

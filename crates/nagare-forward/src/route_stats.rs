//! Counters per forward route (events stored, their bytes, events dead-lettered), for
//! `GET /forward/routes` and `nagare_forward_route_*_total{route}`. One slot per
//! configured route plus one for tags no route matched; the route label is the
//! configured pattern, so the series are bounded by the configuration.

use std::sync::atomic::{AtomicU64, Ordering};

use metrics::Counter;

/// One route's counters.
#[derive(Debug)]
pub struct RouteStats {
    /// The route's `match` pattern; `None` for tags no route matched.
    pub pattern: Option<String>,
    /// The configured topic (empty: the tag itself), or `None` for a `drop` route.
    pub topic: Option<String>,
    events: AtomicU64,
    bytes: AtomicU64,
    dead_lettered: AtomicU64,
    events_counter: Counter,
    bytes_counter: Counter,
    dead_counter: Counter,
}

/// One reading of a route's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteCounts {
    pub events: u64,
    pub bytes: u64,
    pub dead_lettered: u64,
}

impl RouteStats {
    pub(crate) fn new(pattern: Option<String>, topic: Option<String>) -> RouteStats {
        let label = pattern.clone().unwrap_or_else(|| "(unmatched)".to_string());
        RouteStats {
            events_counter: metrics::counter!("nagare_forward_route_events_total", "route" => label.clone()),
            bytes_counter: metrics::counter!("nagare_forward_route_bytes_total", "route" => label.clone()),
            dead_counter: metrics::counter!("nagare_forward_route_dead_lettered_total", "route" => label),
            pattern,
            topic,
            events: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
        }
    }

    /// Events of one request stored through this route (`bytes`: their record bytes).
    pub(crate) fn stored(&self, events: u64, bytes: u64) {
        self.events.fetch_add(events, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.events_counter.increment(events);
        self.bytes_counter.increment(bytes);
    }

    /// Events of this route refused and sent to the dead-letter topic (or dropped).
    pub(crate) fn dead_lettered(&self, events: u64) {
        self.dead_lettered.fetch_add(events, Ordering::Relaxed);
        self.dead_counter.increment(events);
    }

    pub fn counts(&self) -> RouteCounts {
        RouteCounts {
            events: self.events.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let s = RouteStats::new(Some("app.**".into()), Some("app".into()));
        s.stored(3, 300);
        s.stored(1, 10);
        s.dead_lettered(2);
        assert_eq!(
            s.counts(),
            RouteCounts {
                events: 4,
                bytes: 310,
                dead_lettered: 2
            }
        );
    }
}

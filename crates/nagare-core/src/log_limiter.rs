//! Rate limit for warning lines about refused input, shared by the front ends.
//!
//! A client that keeps sending something the broker refuses must not flood the log, yet
//! no refusal may vanish: every front end counts each one in `nagare_rejected_total` and
//! writes at most one line per interval per reason, quoting how many similar lines were
//! kept quiet since the last one.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The usual interval: one line a second per reason.
pub const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Per-reason state: when the last line was written and how many were kept quiet since.
#[derive(Debug)]
struct Slot {
    reason: &'static str,
    last: Instant,
    suppressed: u64,
}

/// Decides, per reason, whether a log line may be written now.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    // A handful of reasons per front end: a short list beats a map and stays `const`.
    slots: Mutex<Vec<Slot>>,
}

impl LogLimiter {
    /// A limiter writing at most one line per `interval` per reason (usable in a `static`).
    pub const fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            slots: Mutex::new(Vec::new()),
        }
    }

    /// `Some(n)` when a line for `reason` may be written at `now`, `n` being the number of
    /// lines for that reason kept quiet since the last one; `None` (and the line is counted
    /// as kept quiet) otherwise.
    pub fn allow(&self, reason: &'static str, now: Instant) -> Option<u64> {
        let mut slots = match self.slots.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        match slots.iter_mut().find(|s| s.reason == reason) {
            None => {
                slots.push(Slot {
                    reason,
                    last: now,
                    suppressed: 0,
                });
                Some(0)
            }
            Some(slot) if now.saturating_duration_since(slot.last) >= self.interval => {
                slot.last = now;
                Some(std::mem::take(&mut slot.suppressed))
            }
            Some(slot) => {
                slot.suppressed += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_per_reason_with_the_quiet_count() {
        let limiter = LogLimiter::new(LOG_INTERVAL);
        let t = Instant::now();
        assert_eq!(limiter.allow("a", t), Some(0));
        assert_eq!(limiter.allow("a", t + Duration::from_millis(10)), None);
        assert_eq!(limiter.allow("a", t + Duration::from_millis(20)), None);
        // Another reason has its own budget.
        assert_eq!(limiter.allow("b", t + Duration::from_millis(30)), Some(0));
        assert_eq!(limiter.allow("a", t + LOG_INTERVAL), Some(2));
        assert_eq!(limiter.allow("a", t + LOG_INTERVAL), None);
        assert_eq!(limiter.allow("a", t + 2 * LOG_INTERVAL), Some(1));
    }
}

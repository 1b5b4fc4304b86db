//! The cleaner's I/O rate limit (Kafka's `log.cleaner.io.max.bytes.per.second`): bytes
//! read and written are counted, and the cleaning thread sleeps whenever it is ahead of
//! the allowed rate. The cleaner runs on its own blocking thread, so sleeping is fine.

use std::time::{Duration, Instant};

pub struct Throttle {
    bytes_per_sec: f64,
    /// Start of the current measuring window and the bytes counted in it.
    window_start: Instant,
    window_bytes: f64,
    /// Time spent sleeping, for the metrics.
    pub slept: Duration,
}

/// Windows are restarted this often so an idle period does not buy a burst.
const WINDOW: Duration = Duration::from_millis(300);

impl Throttle {
    /// `bytes_per_sec` of `None` (or 0) means unlimited.
    pub fn new(bytes_per_sec: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_sec: bytes_per_sec.filter(|&b| b > 0).map_or(0.0, |b| b as f64),
            window_start: Instant::now(),
            window_bytes: 0.0,
            slept: Duration::ZERO,
        }
    }

    /// Counts `bytes` of I/O and sleeps as long as the rate is above the limit.
    pub fn consume(&mut self, bytes: u64) {
        if self.bytes_per_sec <= 0.0 {
            return;
        }
        self.window_bytes += bytes as f64;
        let elapsed = self.window_start.elapsed();
        let allowed = Duration::from_secs_f64(self.window_bytes / self.bytes_per_sec);
        if allowed > elapsed {
            let nap = allowed - elapsed;
            std::thread::sleep(nap);
            self.slept += nap;
        }
        if self.window_start.elapsed() >= WINDOW {
            self.window_start = Instant::now();
            self.window_bytes = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_rate() {
        let mut t = Throttle::new(Some(1_000_000));
        let start = Instant::now();
        for _ in 0..10 {
            t.consume(20_000);
        }
        // 200 kB at 1 MB/s: about 200 ms.
        assert!(start.elapsed() >= Duration::from_millis(180));
        let mut free = Throttle::new(None);
        let start = Instant::now();
        free.consume(u64::MAX / 2);
        assert!(start.elapsed() < Duration::from_millis(50));
    }
}

//! What every bench shares: a progress bar, a latency histogram and the summary table.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over `total` items (messages, requests, events).
pub(crate) fn progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>10} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("valid template"),
    );
    bar.set_prefix(what.to_string());
    bar
}

/// Awaits `run` for at most `limit` while the bar follows `count` every 100 ms, then
/// finishes the bar at the final count.
pub(crate) async fn follow<T>(
    bar: &ProgressBar,
    count: impl Fn() -> u64 + Send + Sync + 'static,
    limit: Duration,
    run: impl std::future::Future<Output = T>,
) -> Result<T, tokio::time::error::Elapsed> {
    let count = std::sync::Arc::new(count);
    let ticker = {
        let (bar, count) = (bar.clone(), count.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position(count());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let out = tokio::time::timeout(limit, run).await;
    ticker.abort();
    bar.set_position(count());
    bar.finish();
    out
}

/// Latencies in microseconds, 1 µs .. 100 s at 3 significant digits.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

pub(crate) fn record(h: &mut Histogram<u64>, d: Duration) {
    let _ = h.record((d.as_micros() as u64).clamp(1, 100_000_000));
}

/// One finished run: what was done, how long it took, how long each item waited.
pub(crate) struct Summary<'a> {
    pub title: &'a str,
    pub target: &'a str,
    pub items: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub latency: Option<&'a Histogram<u64>>,
}

impl Summary<'_> {
    pub(crate) fn items_per_sec(&self) -> f64 {
        self.items as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(crate) fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Prints the table, and one machine-readable `RESULT` line for scripts.
    pub(crate) fn print(&self) {
        let (p50, p99, p999, max) = match self.latency {
            Some(h) if !h.is_empty() => (
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
            ),
            _ => (0, 0, 0, 0),
        };
        println!();
        println!("{} against {}", self.title, self.target);
        println!("  {:<14} {:>16}", "items", self.items);
        println!("  {:<14} {:>16.3} s", "elapsed", self.elapsed.as_secs_f64());
        println!("  {:<14} {:>16.0} /s", "throughput", self.items_per_sec());
        println!("  {:<14} {:>16.2} MB/s", "bandwidth", self.mb_per_sec());
        if self.latency.is_some() {
            println!("  {:<14} {:>16} µs", "latency p50", p50);
            println!("  {:<14} {:>16} µs", "latency p99", p99);
            println!("  {:<14} {:>16} µs", "latency p99.9", p999);
            println!("  {:<14} {:>16} µs", "latency max", max);
        }
        println!(
            "RESULT title={:?} target={:?} items={} secs={:.3} per_sec={:.0} mb_per_sec={:.2} p50_us={} p99_us={} p999_us={}",
            self.title,
            self.target,
            self.items,
            self.elapsed.as_secs_f64(),
            self.items_per_sec(),
            self.mb_per_sec(),
            p50,
            p99,
            p999
        );
    }
}

/// Runs `f` and returns its result with the wall time it took.
pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let out = f();
    (out, t0.elapsed())
}

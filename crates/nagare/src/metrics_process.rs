//! The standard `process_*` families (as every Prometheus client library exports them),
//! read from `/proc/self` at scrape time: resident and virtual memory, CPU seconds, open
//! and maximum file descriptors, start time. Linux only, like nagare; a file that cannot
//! be read leaves its family out rather than failing the scrape.

use std::fmt::Write;

use crate::metrics_scrape::family;

/// Clock ticks per second in `/proc/<pid>/stat`: `USER_HZ`, which the kernel fixes at
/// 100 for user space on every architecture nagare builds for.
const USER_HZ: f64 = 100.0;

pub(crate) fn render(out: &mut String, started_at_ms: i64) {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for (field, name, help) in [
            (
                "VmRSS:",
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            ),
            (
                "VmSize:",
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            ),
        ] {
            if let Some(kb) = kib_field(&status, field) {
                family(out, name, "gauge", help);
                let _ = writeln!(out, "{name} {}", kb * 1024);
            }
        }
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        if let Some(ticks) = cpu_ticks(&stat) {
            family(
                out,
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
            );
            let _ = writeln!(out, "process_cpu_seconds_total {}", ticks as f64 / USER_HZ);
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        family(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
        );
        let _ = writeln!(out, "process_open_fds {}", dir.count());
    }
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        if let Some(max) = max_open_files(&limits) {
            family(
                out,
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
            );
            let _ = writeln!(out, "process_max_fds {max}");
        }
    }
    family(
        out,
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    );
    let _ = writeln!(
        out,
        "process_start_time_seconds {}",
        started_at_ms as f64 / 1000.0
    );
}

/// `VmRSS:     1234 kB` → 1234.
fn kib_field(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// utime + stime (fields 14 and 15) of `/proc/self/stat`. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its closing parenthesis.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, index 11 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The soft limit of `Max open files`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            kib_field("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048)
        );
        let stat = "42 (na ge) re) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0";
        assert_eq!(cpu_ticks(stat), Some(300));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[test]
    fn renders_this_process() {
        let mut out = String::new();
        render(&mut out, 1_700_000_000_000);
        assert!(out.contains("# TYPE process_resident_memory_bytes gauge"));
        assert!(out.contains("process_open_fds "));
        assert!(out.contains("process_cpu_seconds_total "));
        assert!(out.contains("process_start_time_seconds 1700000000"));
    }
}

//! `/metrics`: what the recorder holds (counters and histograms the code paths update),
//! followed by gauges read straight from state at scrape time — exact, and nothing to
//! keep up to date on the hot paths.

use std::fmt::Write;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::http::Ops;

/// The whole scrape, in Prometheus' text format.
pub(crate) fn render(recorded: &PrometheusHandle, ops: &Ops) -> String {
    let mut out = recorded.render();
    connections(&mut out, ops);
    partitions(&mut out, ops);
    out
}

/// Writes a family's `# HELP` and `# TYPE` lines.
pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value escaped as the text format requires.
pub(crate) fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn connections(out: &mut String, ops: &Ops) {
    family(
        out,
        "nagare_connections_open",
        "gauge",
        "Connections open now, per protocol and listener.",
    );
    for ((protocol, listener), n) in ops.connections.open_by_listener() {
        let _ = writeln!(
            out,
            "nagare_connections_open{{protocol=\"{protocol}\",listener=\"{}\"}} {n}",
            esc(listener)
        );
    }
}

fn partitions(out: &mut String, ops: &Ops) {
    let topics = ops.broker.list_topics();
    let gauges: [(&str, &str, fn(&nagare_core::Partition) -> f64); 2] = [
        (
            "nagare_partition_log_end_offset",
            "Offset the next record appended to the partition gets.",
            |p| p.log_end_offset() as f64,
        ),
        (
            "nagare_partition_size_bytes",
            "Bytes of the partition's log on disk.",
            |p| p.size_bytes() as f64,
        ),
    ];
    for (name, help, read) in gauges {
        family(out, name, "gauge", help);
        for t in &topics {
            for p in t.partitions() {
                let _ = writeln!(
                    out,
                    "{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                    esc(t.name()),
                    p.index(),
                    read(&p)
                );
            }
        }
    }
}

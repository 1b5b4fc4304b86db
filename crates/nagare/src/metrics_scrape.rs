//! `/metrics`: what the recorder holds (counters and histograms the code paths update),
//! followed by gauges read straight from state at scrape time — exact, and nothing to
//! keep up to date on the hot paths: connections open, partitions, consumer groups,
//! queues, the broker's traffic totals and the process (`metrics_process.rs`).
//!
//! Every family recorded anywhere in the workspace is described here ([`describe`]), so
//! the scrape carries `# HELP` for all of them; the list doubles as the reference of
//! which families exist (README "Metrics").

use std::fmt::Write;

use metrics::Unit;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::http::Ops;

/// Latency buckets (seconds): from a page-cache append to a slow fsync or a long poll.
const SECONDS_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];
/// Size buckets (bytes) for bytes covered by one fsync.
const BYTES_BUCKETS: &[f64] = &[
    512.0,
    4096.0,
    16_384.0,
    65_536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// Installs the process-wide recorder with histogram buckets and every family's HELP.
pub(crate) fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_bytes".into()), BYTES_BUCKETS)?
        .install_recorder()?;
    describe();
    // Gauges that move up and down from zero are shown from the start (a dashboard then
    // reads 0, not "no data", before the first STOMP subscription or temp queue).
    for kind in ["topic", "queue", "temp"] {
        metrics::gauge!("nagare_stomp_subscriptions", "kind" => kind).increment(0.0);
    }
    metrics::gauge!("nagare_stomp_temp_queues").increment(0.0);
    Ok(handle)
}

/// How often histogram samples are folded into their buckets between scrapes.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds recorded histogram samples into their buckets every few seconds until `stop`.
/// The recorder queues every sample until upkeep runs: without this, a broker nobody
/// scrapes would keep every produce request's latency in memory.
pub(crate) async fn upkeep(handle: PrometheusHandle, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(UPKEEP_EVERY) => handle.run_upkeep(),
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// HELP text of every recorded family.
fn describe() {
    use metrics::{describe_counter as c, describe_gauge as g, describe_histogram as h};
    // Listener layer.
    c!(
        "nagare_connections_accepted_total",
        "Connections accepted, per protocol and listener."
    );
    c!(
        "nagare_connections_closed_total",
        "Connections closed, per protocol and listener."
    );
    c!(
        "nagare_connections_rejected_total",
        "Connections refused at accept for a connection limit, per listener and reason."
    );
    c!(
        "nagare_connections_idle_closed_total",
        "Connections closed by the idle timeout, per listener."
    );
    c!(
        "nagare_tls_handshake_failures_total",
        "TLS handshakes that failed, per listener."
    );
    c!("nagare_auth_failures_total", "Failed logins, per protocol.");
    c!(
        "nagare_auth_successes_total",
        "Successful logins, per protocol."
    );
    c!(
        "nagare_rejected_total",
        "Requests or frames refused, per protocol and reason."
    );
    // Core and log.
    c!(
        "nagare_topic_records_in_total",
        "Records appended to the topic by clients (every protocol)."
    );
    c!(
        "nagare_topic_bytes_in_total",
        Unit::Bytes,
        "Record batch bytes appended to the topic by clients."
    );
    c!(
        "nagare_topic_records_out_total",
        "Records delivered to clients from the topic (Kafka fetch, STOMP MESSAGE)."
    );
    c!(
        "nagare_topic_bytes_out_total",
        Unit::Bytes,
        "Bytes delivered to clients from the topic."
    );
    c!(
        "nagare_log_fsyncs_total",
        "fsyncs of partition logs (internal logs included)."
    );
    c!(
        "nagare_log_fsync_errors_total",
        "fsyncs of partition logs that failed."
    );
    h!(
        "nagare_log_fsync_duration_seconds",
        Unit::Seconds,
        "Duration of one log fsync (segment data, directory, recovery point)."
    );
    h!(
        "nagare_log_fsync_size_bytes",
        Unit::Bytes,
        "Bytes written since the previous fsync that one fsync made durable."
    );
    c!(
        "nagare_cleaner_passes_total",
        "Log compaction passes that rewrote segments."
    );
    c!(
        "nagare_cleaner_bytes_read_total",
        Unit::Bytes,
        "Bytes the log cleaner read (offset map and copy)."
    );
    c!(
        "nagare_cleaner_bytes_written_total",
        Unit::Bytes,
        "Bytes of cleaned segments the log cleaner wrote."
    );
    c!(
        "nagare_cleaner_records_removed_total",
        "Records compaction removed (superseded, keyless or expired tombstones)."
    );
    c!(
        "nagare_cleaner_errors_total",
        "Log compaction passes that failed."
    );
    g!(
        "nagare_cleaner_last_pass_seconds",
        Unit::Seconds,
        "Duration of the last compaction pass."
    );
    g!(
        "nagare_cleaner_max_dirty_ratio",
        "Largest dirty ratio (dirty / cleanable bytes) among compacted partitions."
    );
    // Kafka.
    c!(
        "nagare_kafka_requests_total",
        "Kafka requests, per API and version."
    );
    h!("nagare_kafka_request_duration_seconds", Unit::Seconds, "Kafka request latency from its arrival to its answer, per API (Produce includes the fsync acks=all waits for; Fetch its long poll).");
    c!(
        "nagare_kafka_errors_total",
        "Error codes in Kafka responses, per error name and code."
    );
    // STOMP.
    c!(
        "nagare_stomp_frames_received_total",
        "STOMP frames received, per command."
    );
    c!(
        "nagare_stomp_messages_sent_total",
        "STOMP MESSAGE frames sent, per kind (topic, queue)."
    );
    g!(
        "nagare_stomp_subscriptions",
        "STOMP subscriptions open, per kind (topic, queue, temp)."
    );
    c!(
        "nagare_stomp_subscribes_total",
        "STOMP SUBSCRIBEs that took effect, per kind."
    );
    g!("nagare_stomp_temp_queues", "STOMP temp queues open.");
    // Forward.
    c!(
        "nagare_forward_connections_total",
        "Forward connections served."
    );
    c!(
        "nagare_forward_connection_errors_total",
        "Forward connections that ended in an error, per reason."
    );
    c!(
        "nagare_forward_requests_total",
        "Forward requests, per mode (Message, Forward, PackedForward, CompressedPackedForward)."
    );
    c!("nagare_forward_events_total", "Forward events received.");
    c!(
        "nagare_forward_chunks_total",
        "Forward requests carrying a chunk id (asking for an ack)."
    );
    c!(
        "nagare_forward_acks_total",
        "Forward acks sent (each after its fsync)."
    );
    c!(
        "nagare_forward_decode_errors_total",
        "Forward streams that failed to decode (the connection is closed)."
    );
    c!(
        "nagare_forward_dead_lettered_total",
        "Forward events refused (sent to the dead-letter topic when one is set)."
    );
    c!(
        "nagare_forward_route_events_total",
        "Forward events stored, per route pattern."
    );
    c!(
        "nagare_forward_route_bytes_total",
        Unit::Bytes,
        "Record batch bytes stored, per forward route pattern."
    );
    c!(
        "nagare_forward_route_dead_lettered_total",
        "Forward events refused, per route pattern."
    );
    c!(
        "nagare_forward_backpressure_waits_total",
        "Forward reads that waited for the receiver-wide memory cap."
    );
    g!(
        "nagare_forward_buffered_bytes",
        Unit::Bytes,
        "Forward bytes read and not yet acknowledged, over all connections."
    );
}

/// The whole scrape, in Prometheus' text format.
pub(crate) fn render(recorded: &PrometheusHandle, ops: &Ops) -> String {
    let mut out = recorded.render();
    traffic(&mut out, ops);
    connections(&mut out, ops);
    partitions(&mut out, ops);
    if let Some(core) = &ops.core {
        crate::metrics_groups::render(&mut out, ops, core);
    }
    crate::metrics_process::render(&mut out, ops.started_at_ms);
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

fn traffic(out: &mut String, ops: &Ops) {
    let t = ops.broker.traffic().totals();
    for (name, help, v) in [
        (
            "nagare_records_in_total",
            "Records appended by clients, every topic and protocol.",
            t.records_in,
        ),
        (
            "nagare_bytes_in_total",
            "Record batch bytes appended by clients, every topic and protocol.",
            t.bytes_in,
        ),
        (
            "nagare_records_out_total",
            "Records delivered to clients, every topic and protocol.",
            t.records_out,
        ),
        (
            "nagare_bytes_out_total",
            "Record bytes delivered to clients, every topic and protocol.",
            t.bytes_out,
        ),
    ] {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
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

type PartitionGauge = (
    &'static str,
    &'static str,
    fn(&nagare_core::Partition) -> f64,
);

fn partitions(out: &mut String, ops: &Ops) {
    let topics = ops.broker.list_topics();
    let gauges: [PartitionGauge; 4] = [
        (
            "nagare_partition_log_start_offset",
            "First offset still in the partition's log.",
            |p| p.log_start_offset() as f64,
        ),
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
        (
            "nagare_partition_segments",
            "Segment files of the partition's log.",
            |p| p.segment_count() as f64,
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

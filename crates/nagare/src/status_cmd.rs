//! `nagare status`: one screen about a running broker (version, uptime, listeners,
//! counts, connections, disk, in/out rates). The broker keeps cumulative totals only, so
//! rates come from two `/status` samples taken `--interval-ms` apart.

use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::admin_client::{AdminClient, AdminConnection, AdminLogin};
use crate::http_status::Status;
use crate::output::{bytes, duration, print_json, Output};

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    #[command(flatten)]
    pub login: AdminLogin,
    /// Time between the two samples the rates are computed from; 0 for no rates.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval_ms: u64,
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
}

/// Per second, between the two samples.
#[derive(Debug, Default, Clone, Copy, Serialize)]
struct Rates {
    bytes_in: f64,
    bytes_out: f64,
    records_in: f64,
    records_out: f64,
}

#[derive(Serialize)]
struct WithRates<'a> {
    #[serde(flatten)]
    status: &'a Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    rates: Option<Rates>,
}

pub(crate) fn run(args: StatusArgs) -> anyhow::Result<()> {
    let client = AdminClient::login(&args.conn, &args.login)?;
    let first: Status = client.get("/status")?;
    let (status, rates) = if args.interval_ms == 0 {
        (first, None)
    } else {
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(args.interval_ms));
        let second: Status = client.get("/status")?;
        let secs = t0.elapsed().as_secs_f64().max(0.001);
        let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
        let (a, b) = (&first.traffic, &second.traffic);
        let rates = Rates {
            bytes_in: per_s(a.bytes_in, b.bytes_in),
            bytes_out: per_s(a.bytes_out, b.bytes_out),
            records_in: per_s(a.records_in, b.records_in),
            records_out: per_s(a.records_out, b.records_out),
        };
        (second, Some(rates))
    };
    match args.output {
        Output::Json => print_json(&WithRates {
            status: &status,
            rates,
        }),
        Output::Table => {
            print_screen(&status, rates);
            Ok(())
        }
    }
}

fn print_screen(s: &Status, rates: Option<Rates>) {
    println!(
        "nagare {} (commit {})  node {}  cluster {}",
        s.version, s.commit, s.node_id, s.cluster_id
    );
    let started = time::OffsetDateTime::from_unix_timestamp(s.started_at_ms / 1000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    println!(
        "{:<12} {} (since {started})",
        "uptime",
        duration(s.uptime_seconds)
    );
    println!("{:<12} {}", "data dir", s.data_dir);
    if s.store.kind == "kafka" {
        let state = match &s.store.reason {
            None => "ready".to_string(),
            Some(why) => format!("NOT READY: {why}"),
        };
        println!("{:<12} {} ({state})", "store", s.store.location);
    }
    println!(
        "{:<12} logs {}, {} free of {}",
        "disk",
        bytes(s.disk.log_bytes as f64),
        bytes(s.disk.free_bytes as f64),
        bytes(s.disk.total_bytes as f64)
    );
    for (i, l) in s.listeners.iter().enumerate() {
        println!(
            "{:<12} {:<10} {}{}",
            if i == 0 { "listeners" } else { "" },
            l.name,
            l.address,
            if l.tls { " (TLS)" } else { "" }
        );
    }
    println!(
        "{:<12} {} topics ({} partitions), {} groups, {} queues",
        "objects", s.topics, s.partitions, s.groups, s.queues
    );
    let c = &s.connections;
    println!(
        "{:<12} kafka {}, stomp {}, forward {}, http {}",
        "connections", c.kafka, c.stomp, c.forward, c.http
    );
    let t = &s.traffic;
    match rates {
        Some(r) => {
            println!(
                "{:<12} {:.1} records/s, {}/s (total {} records, {})",
                "in",
                r.records_in,
                bytes(r.bytes_in),
                t.records_in,
                bytes(t.bytes_in as f64)
            );
            println!(
                "{:<12} {:.1} records/s, {}/s (total {} records, {})",
                "out",
                r.records_out,
                bytes(r.bytes_out),
                t.records_out,
                bytes(t.bytes_out as f64)
            );
        }
        None => {
            println!(
                "{:<12} total {} records, {}",
                "in",
                t.records_in,
                bytes(t.bytes_in as f64)
            );
            println!(
                "{:<12} total {} records, {}",
                "out",
                t.records_out,
                bytes(t.bytes_out as f64)
            );
        }
    }
}

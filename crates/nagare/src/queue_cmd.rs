//! `nagare queue list|describe|purge`: the STOMP queues of a running broker through the
//! HTTP admin API (queue `Q` is `/queue/Q` to STOMP clients, stored in topic `queue.Q`).

use clap::{Args, Subcommand};

use crate::admin_client::{path_segment, AdminClient, AdminConnection, AdminLogin};
use crate::http_queues::{Purged, QueueView};
use crate::output::{print_json, Output};

#[derive(Debug, Args)]
pub(crate) struct QueueArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    #[command(flatten)]
    pub login: AdminLogin,
    #[command(subcommand)]
    pub action: QueueAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum QueueAction {
    /// List queues: messages waiting, unacknowledged, consumers, redeliveries.
    List {
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Show one queue, with the offsets of its topic.
    Describe {
        name: String,
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Drop every message the queue holds now, unacknowledged ones included.
    Purge { name: String },
}

const HEADER: (&str, &str, &str, &str, &str, &str) = (
    "QUEUE",
    "TOPIC",
    "DEPTH",
    "UNACKED",
    "CONSUMERS",
    "REDELIVERED",
);

fn row(q: &QueueView) {
    println!(
        "{:<32} {:<38} {:>10} {:>10} {:>10} {:>12}",
        q.name, q.topic, q.depth, q.unacked, q.consumers, q.redeliveries
    );
}

fn header() {
    let h = HEADER;
    println!(
        "{:<32} {:<38} {:>10} {:>10} {:>10} {:>12}",
        h.0, h.1, h.2, h.3, h.4, h.5
    );
}

pub(crate) fn run(args: QueueArgs) -> anyhow::Result<()> {
    let client = AdminClient::login(&args.conn, &args.login)?;
    match args.action {
        QueueAction::List { output } => {
            let queues: Vec<QueueView> = client.get("/queues")?;
            match output {
                Output::Json => print_json(&queues)?,
                Output::Table => {
                    header();
                    queues.iter().for_each(row);
                }
            }
        }
        QueueAction::Describe { name, output } => {
            let q: QueueView = client.get(&format!("/queues/{}", path_segment(&name)))?;
            match output {
                Output::Json => print_json(&q)?,
                Output::Table => {
                    header();
                    row(&q);
                    println!(
                        "topic offsets: start {}, end {}",
                        q.log_start_offset.unwrap_or(0),
                        q.log_end_offset.unwrap_or(0)
                    );
                }
            }
        }
        QueueAction::Purge { name } => {
            let p: Purged = client.post(
                &format!("/queues/{}/purge", path_segment(&name)),
                &serde_json::json!({}),
            )?;
            println!("purged {} message(s) from queue {name}", p.purged);
        }
    }
    Ok(())
}

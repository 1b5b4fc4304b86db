//! `nagare topic ...`: talks to the HTTP admin API of a running broker.

use clap::{Args, Subcommand};

use crate::admin_client::{path_segment, AdminClient, AdminConnection, AdminLogin};
use crate::http::{CreateTopic, TopicInfo};
use crate::output::{print_json, Output};

#[derive(Debug, Args)]
pub(crate) struct TopicArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    #[command(flatten)]
    pub login: AdminLogin,
    #[command(subcommand)]
    pub action: TopicAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TopicAction {
    /// List topics with their partitions and offsets.
    List {
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Show one topic, its settings and per-partition offsets.
    Describe {
        name: String,
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Create a topic.
    Create {
        name: String,
        /// Number of partitions [default: the broker's default_partitions].
        #[arg(short, long)]
        partitions: Option<u32>,
        /// A topic setting, Kafka style: `-c retention.ms=60000 -c nagare.flush=always`.
        #[arg(short, long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// Delete a topic and its data.
    Delete { name: String },
}

pub(crate) fn run(args: TopicArgs) -> anyhow::Result<()> {
    let client = AdminClient::login(&args.conn, &args.login)?;
    match args.action {
        TopicAction::List { output } => {
            let topics: Vec<TopicInfo> = client.get("/topics")?;
            if output == Output::Json {
                return print_json(&topics);
            }
            println!(
                "{:<40} {:>10} {:>14} {:>14}",
                "TOPIC", "PARTITIONS", "RECORDS", "BYTES"
            );
            for t in topics {
                let records: i64 = t
                    .partitions
                    .iter()
                    .map(|p| p.log_end_offset - p.log_start_offset)
                    .sum();
                let bytes: u64 = t.partitions.iter().map(|p| p.size_bytes).sum();
                println!(
                    "{:<40} {:>10} {:>14} {:>14}",
                    t.name,
                    t.partitions.len(),
                    records,
                    bytes
                );
            }
        }
        TopicAction::Describe { name, output } => {
            let t: TopicInfo = client.get(&format!("/topics/{}", path_segment(&name)))?;
            match output {
                Output::Json => print_json(&t)?,
                Output::Table => print_topic(&t),
            }
        }
        TopicAction::Create {
            name,
            partitions,
            configs,
        } => {
            let mut config = std::collections::BTreeMap::new();
            for c in configs {
                let (k, v) = c
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("config {c:?} is not KEY=VALUE"))?;
                config.insert(k.to_string(), v.to_string());
            }
            let body = CreateTopic {
                name,
                partitions,
                config,
            };
            let t: TopicInfo = client.post("/topics", &body)?;
            println!(
                "created topic {} ({} partitions, id {})",
                t.name,
                t.partitions.len(),
                t.id
            );
        }
        TopicAction::Delete { name } => {
            client.delete(&format!("/topics/{}", path_segment(&name)))?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}

fn print_topic(t: &TopicInfo) {
    println!("topic {}  id {}", t.name, t.id);
    println!(
        "{:>10} {:>16} {:>16} {:>14}",
        "PARTITION", "START OFFSET", "END OFFSET", "BYTES"
    );
    for p in &t.partitions {
        println!(
            "{:>10} {:>16} {:>16} {:>14}",
            p.partition, p.log_start_offset, p.log_end_offset, p.size_bytes
        );
    }
    println!("settings:");
    for (k, v) in &t.config {
        println!("  {k} = {v}");
    }
}

//! `nagare topic ...`: talks to the HTTP admin API of a running broker.

use clap::{Args, Subcommand};

use crate::http::{CreateTopic, TopicInfo};

#[derive(Debug, Args)]
pub(crate) struct TopicArgs {
    /// HTTP admin address of the broker.
    #[arg(
        long,
        default_value = "127.0.0.1:9644",
        env = "NAGARE_HTTP_LISTEN",
        global = true
    )]
    pub http: String,
    #[command(subcommand)]
    pub action: TopicAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TopicAction {
    /// List topics with their partitions and offsets.
    List,
    /// Show one topic, its settings and per-partition offsets.
    Describe { name: String },
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
    let base = format!("http://{}", args.http);
    match args.action {
        TopicAction::List => {
            let topics: Vec<TopicInfo> = get(&format!("{base}/topics"))?;
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
        TopicAction::Describe { name } => {
            let t: TopicInfo = get(&format!("{base}/topics/{name}"))?;
            print_topic(&t);
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
            let resp = ureq::post(&format!("{base}/topics")).send_json(&body);
            let t: TopicInfo = check(resp)?.into_json()?;
            println!(
                "created topic {} ({} partitions, id {})",
                t.name,
                t.partitions.len(),
                t.id
            );
        }
        TopicAction::Delete { name } => {
            check(ureq::delete(&format!("{base}/topics/{name}")).call())?;
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

fn get<T: serde::de::DeserializeOwned>(url: &str) -> anyhow::Result<T> {
    Ok(check(ureq::get(url).call())?.into_json()?)
}

fn check(resp: Result<ureq::Response, ureq::Error>) -> anyhow::Result<ureq::Response> {
    match resp {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            anyhow::bail!("broker answered {code}: {}", body.trim())
        }
        Err(e) => anyhow::bail!("cannot reach the broker's HTTP listener: {e}"),
    }
}

//! `nagare produce` and `nagare consume`: minimal Kafka-protocol clients of a running broker.

use clap::Args;

#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Kafka address of the broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to produce to.
    #[arg(short, long)]
    pub topic: String,
    /// Partition to produce to.
    #[arg(short, long, default_value_t = 0)]
    pub partition: i32,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Kafka address of the broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic to read.
    #[arg(short, long)]
    pub topic: String,
    /// Partition to read.
    #[arg(short, long, default_value_t = 0)]
    pub partition: i32,
    /// First offset to read (default: the earliest).
    #[arg(short, long)]
    pub offset: Option<i64>,
    /// Stop after this many records.
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
}

pub fn produce(_args: ProduceArgs) -> anyhow::Result<()> {
    anyhow::bail!("`nagare produce` arrives with the Kafka front end")
}

pub fn consume(_args: ConsumeArgs) -> anyhow::Result<()> {
    anyhow::bail!("`nagare consume` arrives with the Kafka front end")
}

//! `nagare bench produce|consume`: a Kafka-protocol load generator.

use clap::Args;

#[derive(Debug, Args)]
pub struct ProduceArgs {}

#[derive(Debug, Args)]
pub struct ConsumeArgs {}

pub fn produce(_args: ProduceArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}

pub fn consume(_args: ConsumeArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}

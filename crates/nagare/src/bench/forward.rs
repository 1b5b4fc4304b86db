//! `nagare bench forward`: PackedForward chunks with ack over N connections.

use clap::Args;

#[derive(Debug, Args)]
pub struct ForwardArgs {}

pub fn run(_args: ForwardArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}

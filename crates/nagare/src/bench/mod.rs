//! `nagare bench ...`: load generators with a progress bar and a summary table. Each runs
//! the same client against nagare or a peer broker, so ratios come from one binary.

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub kind: BenchKind,
}

#[derive(Debug, Subcommand)]
pub enum BenchKind {}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.kind {}
}

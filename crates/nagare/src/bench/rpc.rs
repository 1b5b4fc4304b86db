//! `nagare bench rpc`: STOMP RPC over MQ (requests to a queue, replies to a temp-queue).

use clap::Args;

#[derive(Debug, Args)]
pub struct RpcArgs {}

pub fn run(_args: RpcArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}

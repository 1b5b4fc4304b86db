//! `nagare bench ...`: load generators with a progress bar and a summary table. Each runs
//! the same client against nagare or a peer broker, so ratios come from one binary.

mod compact;
mod fanout;
mod forward;
mod kafka;
mod queue;
#[allow(dead_code)] // until every bench uses all of it
pub(crate) mod report;
mod rpc;
mod stall;
mod stamp;
mod stomp;

use std::future::Future;

use clap::{Args, Subcommand};

/// Runs a load generator on one thread: the broker under test shares the machine.
fn on_one_thread(bench: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(bench)
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub kind: BenchKind,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchKind {
    /// Kafka producer load (works against nagare or Apache Kafka).
    Produce(kafka::ProduceArgs),
    /// Kafka consumer load (works against nagare or Apache Kafka).
    Consume(kafka::ConsumeArgs),
    /// STOMP RPC over MQ: requests to a queue, replies to a temp-queue (nagare, RabbitMQ,
    /// ActiveMQ).
    Rpc(rpc::RpcArgs),
    /// STOMP persistent queue: producers SEND with receipts, consumers ACK (nagare,
    /// RabbitMQ, ActiveMQ).
    Queue(queue::QueueArgs),
    /// STOMP topic fan-out: one producer, every message to each of N subscribers
    /// (nagare, RabbitMQ, ActiveMQ).
    Fanout(fanout::FanoutArgs),
    /// Fluentd forward PackedForward chunks with ack (nagare or any forward receiver).
    Forward(forward::ForwardArgs),
    /// Log compaction throughput: fills a partition with keyed records and cleans it.
    Compact(compact::CompactArgs),
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.kind {
        BenchKind::Produce(a) => kafka::produce(a),
        BenchKind::Consume(a) => kafka::consume(a),
        BenchKind::Rpc(a) => rpc::run(a),
        BenchKind::Queue(a) => queue::run(a),
        BenchKind::Fanout(a) => fanout::run(a),
        BenchKind::Forward(a) => forward::run(a),
        BenchKind::Compact(a) => compact::run(a),
    }
}

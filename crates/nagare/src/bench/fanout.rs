//! `nagare bench fanout`: STOMP topic fan-out, the workload of scripts/bench/go/fanout.go.
//! `--subscribers` connections subscribe (receipted, `ack:auto`) to one topic first; one
//! producer SENDs without receipts except on every `--receipt-every`-th message and the
//! last, keeping at most `--window` of those outstanding (the flow control any real
//! publisher needs). The run ends when every subscriber has received every message once;
//! reported are deliveries (messages × subscribers) per second and send → delivery latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::BytesMut;
use clap::Args;
use hdrhistogram::Histogram;
use nagare_stomp::Command;
use tokio::io::AsyncWriteExt;

use super::stomp::{put_frame, run_tag, BrokerArgs, Stomp};
use super::{report, stall, stamp};

#[derive(Debug, Args)]
pub(crate) struct FanoutArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// Messages published (each subscriber receives all of them).
    #[arg(long, short = 'n', default_value_t = 100_000)]
    pub messages: u64,
    /// Subscriber connections on the topic.
    #[arg(long, short = 's', default_value_t = 10)]
    pub subscribers: usize,
    /// Body bytes per message (at least 32: the body carries its sequence number and send
    /// time).
    #[arg(long, default_value_t = 100)]
    pub size: usize,
    /// A receipt on every this many SENDs (and on the last).
    #[arg(long, default_value_t = 1000)]
    pub receipt_every: u64,
    /// Receipted SENDs the producer keeps outstanding.
    #[arg(long, default_value_t = 2)]
    pub window: u64,
    /// The topic. Default: `/topic/bench-fan-<unique per run>`.
    #[arg(long)]
    pub topic: Option<String>,
    /// Abort a run that has not finished in this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Fail when no message or receipt arrives for this many seconds.
    #[arg(long, default_value_t = 30)]
    pub idle_secs: u64,
}

/// What the producer and subscriber tasks share.
struct Shared {
    start: Instant,
    messages: u64,
    deliveries: u64,
    delivered: AtomicU64,
    receipts: AtomicU64,
    idle: Duration,
}

impl Shared {
    fn stalled(&self, what: &str) -> String {
        format!(
            "{what}: nothing for {:?}; {} of {} deliveries",
            self.idle,
            self.delivered.load(Ordering::Relaxed),
            self.deliveries
        )
    }
}

pub(super) fn run(args: FanoutArgs) -> anyhow::Result<()> {
    if args.messages == 0 || args.subscribers == 0 || args.receipt_every == 0 || args.window == 0 {
        bail!("messages, subscribers, receipt-every and window must be at least 1");
    }
    stamp::check_size(args.size)?;
    super::on_one_thread(bench(args))
}

async fn bench(args: FanoutArgs) -> anyhow::Result<()> {
    let conn = args.broker.conn();
    let topic = args
        .topic
        .clone()
        .unwrap_or_else(|| format!("/topic/bench-fan-{}", run_tag()));
    let mut subscribers = Vec::new();
    for i in 0..args.subscribers {
        let mut s = Stomp::connect(&conn).await?;
        s.subscribe(&format!("t{i}"), &topic, &[("ack", "auto")])
            .await?;
        subscribers.push(s);
    }
    let producer = Stomp::connect(&conn).await?;
    let deliveries = args.messages * args.subscribers as u64;
    let shared = Arc::new(Shared {
        start: Instant::now(),
        messages: args.messages,
        deliveries,
        delivered: AtomicU64::new(0),
        receipts: AtomicU64::new(0),
        idle: Duration::from_secs(args.idle_secs),
    });
    println!(
        "fanout {topic} on {} ({}): {} messages of {} B to {} subscribers, a receipt every {}",
        conn.name, conn.addr, args.messages, args.size, args.subscribers, args.receipt_every
    );
    let bar = report::progress(deliveries, "deliveries");
    let run = run_all(&args, &topic, &shared, subscribers, producer);
    let delivered = shared.clone();
    let outcome = report::follow(
        &bar,
        move || delivered.delivered.load(Ordering::Relaxed),
        Duration::from_secs(args.timeout_secs),
        run,
    )
    .await;
    let latency = outcome.map_err(|_| {
        anyhow::anyhow!(
            "fanout run not finished after {} s; {} of {} deliveries",
            args.timeout_secs,
            shared.delivered.load(Ordering::Relaxed),
            deliveries
        )
    })??;
    let elapsed = shared.start.elapsed();
    let title = format!(
        "stomp fanout 1->{} n={} size={}",
        args.subscribers, args.messages, args.size
    );
    report::Summary {
        title: &title,
        target: conn.name,
        items: deliveries,
        bytes: deliveries * args.size as u64,
        elapsed,
        latency: Some(&latency),
    }
    .print();
    println!(
        "  published      {:>16.0} /s",
        args.messages as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// Runs the producer and the subscribers to the end; returns the delivery latencies. The
/// first task to fail ends the run.
async fn run_all(
    args: &FanoutArgs,
    topic: &str,
    shared: &Arc<Shared>,
    subscribers: Vec<Stomp>,
    producer: Stomp,
) -> anyhow::Result<Histogram<u64>> {
    let mut tasks = tokio::task::JoinSet::new();
    for s in subscribers {
        let shared = shared.clone();
        tasks.spawn(async move { receive(s, shared).await.context("subscriber") });
    }
    {
        let (shared, topic) = (shared.clone(), topic.to_string());
        let (size, every, window) = (args.size, args.receipt_every, args.window);
        tasks.spawn(async move {
            publish(producer, topic, shared, size, every, window)
                .await
                .context("producer")?;
            // The producer's task yields no latencies.
            anyhow::Ok(None)
        });
    }
    let mut latency = report::latency_histogram();
    while let Some(joined) = tasks.join_next().await {
        match joined.context("bench task")? {
            Ok(Some(h)) => {
                latency.add(&h).ok();
            }
            Ok(None) => {}
            Err(e) => {
                tasks.abort_all();
                return Err(e);
            }
        }
    }
    Ok(latency)
}

async fn publish(
    s: Stomp,
    topic: String,
    shared: Arc<Shared>,
    size: usize,
    every: u64,
    window: u64,
) -> anyhow::Result<()> {
    let Stomp { mut rd, mut wr } = s;
    let mut stamper = stamp::Stamper::new(shared.start, size, b't')?;
    let mut out = BytesMut::with_capacity(128 * 1024);
    let (mut asked, mut got) = (0u64, 0u64);
    for seq in 0..shared.messages {
        let last = seq + 1 == shared.messages;
        let receipted = (seq + 1) % every == 0 || last;
        let receipt = seq.to_string();
        let mut headers = vec![("destination", topic.as_str())];
        if receipted {
            headers.push(("receipt", receipt.as_str()));
            asked += 1;
        }
        put_frame(&mut out, "SEND", &headers, Some(stamper.body(seq)));
        if receipted || out.len() >= 64 * 1024 {
            wr.write_all(&out).await?;
            out.clear();
        }
        while asked - got > window || (last && got < asked) {
            let wait = rd.wait_for(Command::Receipt);
            let stalled = |_| shared.stalled("producer waiting for a RECEIPT");
            stall::bounded(&shared.receipts, shared.idle, wait, stalled).await?;
            shared.receipts.fetch_add(1, Ordering::Relaxed);
            got += 1;
        }
    }
    Ok(())
}

/// Receives every message once; returns send → delivery latencies.
async fn receive(s: Stomp, shared: Arc<Shared>) -> anyhow::Result<Option<Histogram<u64>>> {
    let Stomp { mut rd, wr } = s;
    let mut hist = report::latency_histogram();
    let mut seen = vec![false; shared.messages as usize];
    let mut frames = Vec::new();
    let mut got = 0;
    while got < shared.messages {
        frames.clear();
        let read = rd.next_raw_batch(&mut frames);
        let stalled = |_| shared.stalled("subscriber waiting for a MESSAGE");
        stall::bounded(&shared.delivered, shared.idle, read, stalled).await?;
        for f in &frames {
            rd.fail_on_raw_error(f)?;
            if f.command != Command::Message {
                continue;
            }
            let (seq, age) = stamp::read(shared.start, &f.body)?;
            let slot = seen
                .get_mut(seq as usize)
                .with_context(|| format!("message {seq} was never sent"))?;
            if std::mem::replace(slot, true) {
                bail!("message {seq} delivered twice to one subscriber");
            }
            report::record(&mut hist, age);
            got += 1;
            shared.delivered.fetch_add(1, Ordering::Relaxed);
        }
    }
    // The connection stays open until here: closing it early would end the subscription.
    drop(wr);
    Ok(Some(hist))
}

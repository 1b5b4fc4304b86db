//! `nagare bench queue`: STOMP persistent queue, the workload of scripts/bench/go/queue.go.
//! Producers SEND with `persistent:true` and a receipt each, keeping `--window` receipts
//! outstanding (a receipt is the broker's promise the message is stored); consumers,
//! subscribed (and receipted) first with a prefetch, ACK what they get: cumulatively every
//! `--ack-every` messages with `ack:client`, each message with `ack:client-individual`.
//! The run ends when every message is receipted and delivered, and every consumer's last
//! ACK is receipted. Each delivery is checked (exactly once); latency is send → delivery.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::BytesMut;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use nagare_stomp::{Command, Frame, Version};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};

use super::stomp::{fail_on_error, put_frame, run_tag, BrokerArgs, Stomp};
use super::{report, stall, stamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AckMode {
    /// Cumulative ACK every `--ack-every` messages and once at the end.
    Client,
    /// One ACK per message (written together per read).
    ClientIndividual,
}

#[derive(Debug, Args)]
pub(crate) struct QueueArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// Messages in total, split over the producers.
    #[arg(long, short = 'n', default_value_t = 100_000)]
    pub messages: u64,
    /// Body bytes per message (at least 32: the body carries its sequence number and send
    /// time).
    #[arg(long, default_value_t = 100)]
    pub size: usize,
    /// Producer connections.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer connections, each with its own subscription to the queue.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// SENDs per producer awaiting their RECEIPT.
    #[arg(long, default_value_t = 256)]
    pub window: usize,
    /// Acknowledgement mode of the subscriptions.
    #[arg(long, value_enum, default_value = "client")]
    pub ack: AckMode,
    /// With `--ack client`: a cumulative ACK every this many messages per consumer.
    #[arg(long, default_value_t = 100)]
    pub ack_every: u64,
    /// Consumer prefetch (sent as `prefetch-count` and `activemq.prefetchSize`).
    #[arg(long, default_value_t = 1000)]
    pub prefetch: u32,
    /// The queue. Default: `/queue/bench-q-<unique per run>`, so that leftovers of an
    /// earlier run never count.
    #[arg(long)]
    pub queue: Option<String>,
    /// Abort a run that has not finished in this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Fail when no message, receipt or ACK receipt arrives for this many seconds.
    #[arg(long, default_value_t = 30)]
    pub idle_secs: u64,
}

/// What the producer and consumer tasks share.
struct Shared {
    start: Instant,
    messages: u64,
    /// One flag per message: delivered yet?
    seen: Vec<AtomicBool>,
    delivered: AtomicU64,
    receipted: AtomicU64,
    idle: Duration,
}

impl Shared {
    fn stalled(&self, what: &str) -> String {
        format!(
            "{what}: nothing for {:?}; {} of {} messages receipted, {} delivered",
            self.idle,
            self.receipted.load(Ordering::Relaxed),
            self.messages,
            self.delivered.load(Ordering::Relaxed)
        )
    }
}

pub(super) fn run(args: QueueArgs) -> anyhow::Result<()> {
    if args.messages == 0
        || args.producers == 0
        || args.consumers == 0
        || args.window == 0
        || args.ack_every == 0
    {
        bail!("messages, producers, consumers, window and ack-every must be at least 1");
    }
    stamp::check_size(args.size)?;
    super::on_one_thread(bench(args))
}

async fn bench(args: QueueArgs) -> anyhow::Result<()> {
    let conn = args.broker.conn();
    let queue = args
        .queue
        .clone()
        .unwrap_or_else(|| format!("/queue/bench-q-{}", run_tag()));
    let prefetch = args.prefetch.to_string();
    let ack = match args.ack {
        AckMode::Client => "client",
        AckMode::ClientIndividual => "client-individual",
    };
    let mut consumers = Vec::new();
    for c in 0..args.consumers {
        let mut s = Stomp::connect(&conn).await?;
        let id = format!("q{c}");
        let extra = [
            ("ack", ack),
            ("prefetch-count", prefetch.as_str()),
            ("activemq.prefetchSize", prefetch.as_str()),
        ];
        s.subscribe(&id, &queue, &extra).await?;
        consumers.push((s, id));
    }
    let mut producers = Vec::new();
    for _ in 0..args.producers {
        producers.push(Stomp::connect(&conn).await?);
    }
    let shared = Arc::new(Shared {
        start: Instant::now(),
        messages: args.messages,
        seen: (0..args.messages).map(|_| AtomicBool::new(false)).collect(),
        delivered: AtomicU64::new(0),
        receipted: AtomicU64::new(0),
        idle: Duration::from_secs(args.idle_secs),
    });
    println!(
        "queue {queue} on {} ({}): {} messages of {} B, {} producer(s) with {} receipts \
         outstanding, {} consumer(s) ack:{ack}",
        conn.name, conn.addr, args.messages, args.size, args.producers, args.window, args.consumers
    );
    let bar = report::progress(args.messages, "messages");
    let run = run_all(&args, &queue, &shared, consumers, producers);
    let delivered = shared.clone();
    let outcome = report::follow(
        &bar,
        move || delivered.delivered.load(Ordering::Relaxed),
        Duration::from_secs(args.timeout_secs),
        run,
    )
    .await;
    let (delivery, receipt) = outcome.map_err(|_| {
        anyhow::anyhow!(
            "queue run not finished after {} s; {} of {} messages receipted, {} delivered",
            args.timeout_secs,
            shared.receipted.load(Ordering::Relaxed),
            args.messages,
            shared.delivered.load(Ordering::Relaxed)
        )
    })??;
    let elapsed = shared.start.elapsed();
    let mut title = format!(
        "stomp queue n={} size={} window={}",
        args.messages, args.size, args.window
    );
    // The default one-to-one run keeps the Go client's title, so that results line up.
    if args.producers != 1 || args.consumers != 1 {
        title.push_str(&format!(" p={} c={}", args.producers, args.consumers));
    }
    report::Summary {
        title: &title,
        target: conn.name,
        items: args.messages,
        bytes: args.messages * args.size as u64,
        elapsed,
        latency: Some(&delivery),
    }
    .print();
    println!(
        "  receipt latency p50 {} µs, p99 {} µs, max {} µs (send → RECEIPT)",
        receipt.value_at_quantile(0.5),
        receipt.value_at_quantile(0.99),
        receipt.max()
    );
    Ok(())
}

/// Which side a finished task was on, with its latencies.
enum Done {
    Producer(Histogram<u64>),
    Consumer(Histogram<u64>),
}

/// Runs the producers and consumers to the end; returns the delivery and receipt
/// latencies. The first task to fail ends the run (the others are aborted), so a broken
/// connection is reported as itself rather than as a stall elsewhere.
async fn run_all(
    args: &QueueArgs,
    queue: &str,
    shared: &Arc<Shared>,
    consumers: Vec<(Stomp, String)>,
    producers: Vec<Stomp>,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)> {
    // Flips once every message is delivered: consumers then send their last ACK.
    let (all_tx, all_rx) = watch::channel(false);
    let all_tx = Arc::new(all_tx);
    let ack_every = match args.ack {
        AckMode::Client => Some(args.ack_every),
        AckMode::ClientIndividual => None,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for (s, id) in consumers {
        let (shared, all_tx, all_rx) = (shared.clone(), all_tx.clone(), all_rx.clone());
        tasks.spawn(async move {
            consume(s, id, shared, ack_every, all_tx, all_rx)
                .await
                .map(Done::Consumer)
                .context("consumer")
        });
    }
    let producers_n = args.producers as u64;
    let mut first = 0;
    for (p, s) in producers.into_iter().enumerate() {
        let count = share(args.messages, producers_n, p as u64);
        let (shared, queue) = (shared.clone(), queue.to_string());
        let (size, window) = (args.size, args.window);
        tasks.spawn(async move {
            produce(s, queue, shared, first, count, size, window)
                .await
                .map(Done::Producer)
                .context("producer")
        });
        first += count;
    }
    let mut receipt = report::latency_histogram();
    let mut delivery = report::latency_histogram();
    while let Some(joined) = tasks.join_next().await {
        match joined.context("bench task")? {
            Ok(Done::Producer(h)) => receipt.add(&h).ok(),
            Ok(Done::Consumer(h)) => delivery.add(&h).ok(),
            Err(e) => {
                tasks.abort_all();
                return Err(e);
            }
        };
    }
    Ok((delivery, receipt))
}

/// Producer `p`'s part of `total` split over `n`: the first ones take the remainder.
fn share(total: u64, n: u64, p: u64) -> u64 {
    total / n + u64::from(p < total % n)
}

/// Sends messages `first..first + count`, keeping up to `window` receipts outstanding;
/// returns send → RECEIPT latencies.
async fn produce(
    s: Stomp,
    queue: String,
    shared: Arc<Shared>,
    first: u64,
    count: u64,
    size: usize,
    window: usize,
) -> anyhow::Result<Histogram<u64>> {
    let Stomp { mut rd, mut wr } = s;
    // Send times of the SENDs awaiting their receipt; receipts come back in order on one
    // connection, so the oldest is the one a receipt answers. The channel's bound is
    // the window.
    let (sent_tx, mut sent_rx) = mpsc::channel::<Instant>(window);
    let receipts = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut hist = report::latency_histogram();
            for _ in 0..count {
                let wait = rd.wait_for(Command::Receipt);
                let stalled = |_| shared.stalled("producer waiting for a RECEIPT");
                stall::bounded(&shared.receipted, shared.idle, wait, stalled).await?;
                let t0 = sent_rx
                    .recv()
                    .await
                    .context("a RECEIPT for a SEND never sent")?;
                report::record(&mut hist, t0.elapsed());
                shared.receipted.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(hist)
        })
    };
    let mut stamper = stamp::Stamper::new(shared.start, size, b'm')?;
    let mut out = BytesMut::with_capacity(64 * 1024);
    for seq in first..first + count {
        let now = Instant::now();
        if sent_tx.send(now).await.is_err() {
            // The receipt reader stopped: its error says why.
            break;
        }
        let receipt = seq.to_string();
        let headers = [
            ("destination", queue.as_str()),
            ("persistent", "true"),
            ("receipt", receipt.as_str()),
        ];
        put_frame(&mut out, "SEND", &headers, Some(stamper.body(seq)));
        // Write when the window is full, the buffer is big or this is the last: batching
        // SENDs is the client's business, as any client with pipelined receipts does.
        if sent_tx.capacity() == 0 || out.len() >= 32 * 1024 || seq + 1 == first + count {
            wr.write_all(&out).await?;
            out.clear();
        }
    }
    let hist = receipts.await.context("receipt reader")??;
    // Keep the connection open until every receipt is in (dropping `wr` would close it).
    drop(wr);
    Ok(hist)
}

/// Receives until every message (of all consumers together) is delivered, ACKing as it
/// goes; then ACKs its last message with a receipt and waits for it.
async fn consume(
    s: Stomp,
    id: String,
    shared: Arc<Shared>,
    ack_every: Option<u64>,
    all_tx: Arc<watch::Sender<bool>>,
    mut all_rx: watch::Receiver<bool>,
) -> anyhow::Result<Histogram<u64>> {
    let Stomp { mut rd, mut wr } = s;
    let v12 = rd.version() == Version::V1_2;
    let mut hist = report::latency_histogram();
    let mut frames = Vec::new();
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut unacked = 0u64;
    let mut got = 0u64;
    let mut last: Option<Frame> = None;
    while !*all_rx.borrow() {
        frames.clear();
        let read = async {
            tokio::select! {
                // Another consumer took the last message: stop reading.
                _ = all_rx.changed() => anyhow::Ok(()),
                r = rd.next_batch(&mut frames) => r,
            }
        };
        let stalled = |_| shared.stalled("consumer waiting for a MESSAGE");
        stall::bounded(&shared.delivered, shared.idle, read, stalled).await?;
        for f in frames.drain(..) {
            fail_on_error(&f)?;
            if f.command != Command::Message {
                continue;
            }
            let (seq, age) = stamp::read(shared.start, &f.body)?;
            let slot = shared
                .seen
                .get(seq as usize)
                .with_context(|| format!("message {seq} was never sent"))?;
            if slot.swap(true, Ordering::Relaxed) {
                bail!("message {seq} delivered twice");
            }
            report::record(&mut hist, age);
            got += 1;
            unacked += 1;
            let completes = shared.delivered.fetch_add(1, Ordering::Relaxed) + 1 == shared.messages;
            // The message that completes the run is acknowledged by the last ACK below.
            let ack_now = !completes
                && match ack_every {
                    None => true,
                    Some(every) => unacked >= every,
                };
            if ack_now {
                put_ack(&mut out, &f, &id, v12, None)?;
                unacked = 0;
                last = None;
            } else {
                last = Some(f);
            }
            if completes {
                all_tx.send_replace(true);
            }
        }
        if !out.is_empty() {
            wr.write_all(&out).await?;
            out.clear();
        }
    }
    // The last ACK carries a receipt: once it is in, the broker has taken every ACK. A
    // consumer whose messages are all acknowledged already (ACKing one twice is an error
    // to RabbitMQ) asks for the receipt of a DISCONNECT instead, which is also only
    // given once every earlier frame is processed.
    match last {
        Some(f) => put_ack(&mut out, &f, &id, v12, Some("last-ack"))?,
        None if got > 0 => put_frame(&mut out, "DISCONNECT", &[("receipt", "last-ack")], None),
        None => return Ok(hist),
    }
    wr.write_all(&out).await?;
    let wait = rd.expect(Command::Receipt, shared.idle, "the last ACK");
    wait.await?;
    Ok(hist)
}

/// ACK of `f`: `id` = its `ack` header in STOMP 1.2, `message-id` and `subscription`
/// before.
fn put_ack(
    out: &mut BytesMut,
    f: &Frame,
    sub: &str,
    v12: bool,
    receipt: Option<&str>,
) -> anyhow::Result<()> {
    let mut headers = Vec::with_capacity(3);
    if v12 {
        headers.push((
            "id",
            f.header("ack").context("MESSAGE without an ack header")?,
        ));
    } else {
        let id = f
            .header("message-id")
            .context("MESSAGE without a message-id")?;
        headers.push(("message-id", id));
        headers.push(("subscription", sub));
    }
    if let Some(r) = receipt {
        headers.push(("receipt", r));
    }
    put_frame(out, "ACK", &headers, None);
    Ok(())
}

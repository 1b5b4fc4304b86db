//! `nagare bench rpc`: STOMP RPC over MQ, as NewtMQ's rpc-bench does it. A responder
//! subscribes to `/queue/rpc`; each client SENDs numbers there with
//! `reply-to:/temp-queue/<name>` and a `correlation-id`; the responder replies with the
//! number plus one to whatever `reply-to` it got; every reply is checked (right value,
//! each exactly once).
//!
//! Modes: `pipelined` (each client sends all its requests without waiting; replies are
//! read as they come) and `lockstep` (one request in flight per client). The same client
//! runs against nagare, RabbitMQ's STOMP plugin (vhost `/`, guest/guest, replies arrive
//! without a SUBSCRIBE) and ActiveMQ (the requester must SUBSCRIBE to its temp queue).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::{BufMut, BytesMut};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use nagare_stomp::{Command, Frame};
use tokio::io::AsyncWriteExt;

use super::report;
use super::stomp::{fail_on_error, Conn, Flavor, Stomp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    Pipelined,
    Lockstep,
    Both,
}

#[derive(Debug, Args)]
pub(crate) struct RpcArgs {
    /// Which broker (sets the defaults of port, login, vhost and temp-queue habit).
    #[arg(long, value_enum, default_value = "nagare")]
    pub target: Flavor,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Default: 61613 (nagare, RabbitMQ), 61614 (ActiveMQ as the peers script runs it).
    #[arg(long)]
    pub port: Option<u16>,
    /// Default: guest for RabbitMQ, none otherwise.
    #[arg(long)]
    pub login: Option<String>,
    #[arg(long)]
    pub passcode: Option<String>,
    /// CONNECT `host` header. Default: `/` for RabbitMQ, the host otherwise.
    #[arg(long)]
    pub vhost: Option<String>,
    /// SUBSCRIBE to the temp queue before sending (ActiveMQ needs it; default for it).
    #[arg(long)]
    pub temp_subscribe: Option<bool>,
    /// Requests in total, split over the clients.
    #[arg(long, short = 'n', default_value_t = 32_768)]
    pub requests: u64,
    /// Client connections, each with its own temp queue.
    #[arg(long, short = 'c', default_value_t = 1)]
    pub concurrency: usize,
    #[arg(long, value_enum, default_value = "both")]
    pub mode: Mode,
    /// Run the standard matrix: 32k, 128k, 512k requests at concurrency 1 and 10k at 4,
    /// 16 and 64, each pipelined and lock-step.
    #[arg(long)]
    pub suite: bool,
    /// The service queue.
    #[arg(long, default_value = "/queue/rpc")]
    pub queue: String,
    /// prefetch-count of the responder's subscription.
    #[arg(long, default_value_t = 1000)]
    pub prefetch: u32,
    /// Abort a run that has not finished in this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
}

fn conn_from_args(a: &RpcArgs) -> Conn {
    let port = a.port.unwrap_or(a.target.default_port());
    Conn::new(
        a.target,
        format!("{}:{}", a.host, port),
        a.login.clone(),
        a.passcode.clone(),
        a.vhost.clone(),
        a.temp_subscribe,
    )
}

pub(super) fn run(args: RpcArgs) -> anyhow::Result<()> {
    if args.concurrency == 0 || args.requests == 0 {
        bail!("requests and concurrency must be at least 1");
    }
    super::on_one_thread(bench(args))
}

async fn bench(args: RpcArgs) -> anyhow::Result<()> {
    let conn = conn_from_args(&args);
    let plan: Vec<(u64, usize)> = if args.suite {
        vec![
            (32_768, 1),
            (131_072, 1),
            (524_288, 1),
            (10_000, 4),
            (10_000, 16),
            (10_000, 64),
        ]
    } else {
        vec![(args.requests, args.concurrency)]
    };
    let modes: &[bool] = match args.mode {
        Mode::Pipelined => &[true],
        Mode::Lockstep => &[false],
        Mode::Both => &[true, false],
    };
    let responder = tokio::spawn(responder(conn.clone(), args.queue.clone(), args.prefetch));
    // Let the responder subscribe before the first request.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if responder.is_finished() {
        responder.await??;
        bail!("responder stopped");
    }
    let mut rows = Vec::new();
    for &(requests, concurrency) in &plan {
        for &pipelined in modes {
            let mode = if pipelined { "pipelined" } else { "lockstep" };
            let title = format!("rpc {mode} n={requests} c={concurrency}");
            let run = run_clients(&conn, &args.queue, requests, concurrency, pipelined);
            let (elapsed, hist) = tokio::time::timeout(Duration::from_secs(args.timeout_secs), run)
                .await
                .with_context(|| format!("{title}: timed out"))??;
            let summary = report::Summary {
                title: &title,
                target: conn.name,
                items: requests,
                bytes: 0,
                elapsed,
                latency: (!pipelined).then_some(&hist),
            };
            summary.print();
            let rate = summary.items_per_sec();
            rows.push((title, rate));
        }
    }
    responder.abort();
    println!();
    println!("rpc summary against {} ({})", conn.name, conn.addr);
    for (title, rate) in rows {
        println!("  {title:<36} {rate:>12.0} req/s");
    }
    Ok(())
}

/// Runs `concurrency` clients splitting `requests`; returns wall time and round trips.
async fn run_clients(
    conn: &Conn,
    queue: &str,
    requests: u64,
    concurrency: usize,
    pipelined: bool,
) -> anyhow::Result<(Duration, Histogram<u64>)> {
    let mut clients = Vec::new();
    for c in 0..concurrency {
        let per =
            requests / concurrency as u64 + u64::from((c as u64) < requests % concurrency as u64);
        let first: u64 = (0..c)
            .map(|k| {
                requests / concurrency as u64
                    + u64::from((k as u64) < requests % concurrency as u64)
            })
            .sum();
        let client = Client::connect(conn, c).await?;
        clients.push((client, first, per));
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(client, first, per)| {
            let queue = queue.to_string();
            tokio::spawn(async move { client.run(&queue, first, per, pipelined).await })
        })
        .collect();
    let mut hist = report::latency_histogram();
    for t in tasks {
        let h = t.await??;
        hist.add(&h).ok();
    }
    Ok((start.elapsed(), hist))
}

/// Serves the queue: each request's number plus one, to its `reply-to`, with its
/// `correlation-id`. Replies to one read are written with one write.
async fn responder(conn: Conn, queue: String, prefetch: u32) -> anyhow::Result<()> {
    let mut s = Stomp::connect(&conn).await?;
    let sub = format!(
        "SUBSCRIBE\nid:rpc\ndestination:{queue}\nack:auto\nprefetch-count:{prefetch}\nactivemq.prefetchSize:{prefetch}\n\n\0"
    );
    s.wr.write_all(sub.as_bytes()).await?;
    // Replies are written by their own task so that reading never waits for writing: a
    // broker that stops reading while its own writes are pending (ActiveMQ's NIO
    // transport) would otherwise deadlock with a responder blocked in a write.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bytes::Bytes>();
    let mut wr = s.wr;
    let writer = tokio::spawn(async move {
        while let Some(b) = rx.recv().await {
            wr.write_all(&b).await?;
        }
        anyhow::Ok(())
    });
    let mut frames = Vec::new();
    let mut out = BytesMut::with_capacity(64 * 1024);
    loop {
        if writer.is_finished() {
            return writer.await?;
        }
        frames.clear();
        s.rd.next_batch(&mut frames).await?;
        for f in &frames {
            if f.command == Command::Error {
                // ActiveMQ refuses replies to temp queues of an earlier, aborted run
                // whose requests were still queued; the responder goes on.
                tracing::debug!(message = ?f.header("message"), "responder got ERROR");
                continue;
            }
            if f.command != Command::Message {
                continue;
            }
            let (Some(reply_to), Some(corr)) = (f.header("reply-to"), f.header("correlation-id"))
            else {
                continue;
            };
            let n: u64 = std::str::from_utf8(&f.body)
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(0);
            let body = (n + 1).to_string();
            put_send(&mut out, reply_to, None, corr, &body);
        }
        if !out.is_empty() && tx.send(out.split().freeze()).is_err() {
            return writer.await?;
        }
    }
}

fn put_send(out: &mut BytesMut, dest: &str, reply_to: Option<&str>, corr: &str, body: &str) {
    out.put_slice(b"SEND\ndestination:");
    out.put_slice(dest.as_bytes());
    if let Some(r) = reply_to {
        out.put_slice(b"\nreply-to:");
        out.put_slice(r.as_bytes());
    }
    out.put_slice(b"\ncorrelation-id:");
    out.put_slice(corr.as_bytes());
    out.put_slice(b"\ncontent-length:");
    out.put_slice(body.len().to_string().as_bytes());
    out.put_slice(b"\n\n");
    out.put_slice(body.as_bytes());
    out.put_u8(0);
}

struct Client {
    stomp: Stomp,
    temp: String,
}

impl Client {
    async fn connect(conn: &Conn, index: usize) -> anyhow::Result<Client> {
        let mut stomp = Stomp::connect(conn).await?;
        let temp = format!("/temp-queue/rpc-bench-{index}");
        if conn.temp_subscribe {
            let f = format!("SUBSCRIBE\nid:replies\ndestination:{temp}\nreceipt:sub\n\n\0");
            stomp.wr.write_all(f.as_bytes()).await?;
            let r = stomp.rd.next().await?;
            if r.command != Command::Receipt {
                bail!(
                    "expected RECEIPT for the temp-queue SUBSCRIBE, got {:?}",
                    r.command
                );
            }
        }
        Ok(Client { stomp, temp })
    }

    /// Sends requests `first..first+count` and checks every reply.
    async fn run(
        self,
        queue: &str,
        first: u64,
        count: u64,
        pipelined: bool,
    ) -> anyhow::Result<Histogram<u64>> {
        let Client { stomp, temp } = self;
        let Stomp { mut rd, mut wr } = stomp;
        let mut hist = report::latency_histogram();
        let mut seen = vec![false; count as usize];
        let mut frames = Vec::new();
        if pipelined {
            // All requests go out without waiting; replies are read meanwhile so that
            // neither side's socket buffer fills up and stalls the other.
            let queue = queue.to_string();
            let sender = tokio::spawn(async move {
                let mut out = BytesMut::with_capacity(128 * 1024);
                for i in first..first + count {
                    let s = i.to_string();
                    put_send(&mut out, &queue, Some(&temp), &s, &s);
                    if out.len() >= 64 * 1024 {
                        wr.write_all(&out).await?;
                        out.clear();
                    }
                }
                wr.write_all(&out).await?;
                anyhow::Ok(wr)
            });
            let mut got = 0;
            while got < count {
                frames.clear();
                rd.next_batch(&mut frames).await?;
                for f in &frames {
                    fail_on_error(f)?;
                    if f.command == Command::Message {
                        check(f, first, &mut seen)?;
                        got += 1;
                    }
                }
            }
            sender.await??;
        } else {
            let mut out = BytesMut::with_capacity(256);
            for i in first..first + count {
                let s = i.to_string();
                put_send(&mut out, queue, Some(&temp), &s, &s);
                let t0 = Instant::now();
                wr.write_all(&out).await?;
                out.clear();
                let mut replied = false;
                while !replied {
                    frames.clear();
                    rd.next_batch(&mut frames).await?;
                    for f in &frames {
                        fail_on_error(f)?;
                        if f.command == Command::Message {
                            check(f, first, &mut seen)?;
                            replied = true;
                        }
                    }
                }
                report::record(&mut hist, t0.elapsed());
            }
        }
        Ok(hist)
    }
}

/// A reply must be its request's number plus one, and arrive exactly once.
fn check(f: &Frame, first: u64, seen: &mut [bool]) -> anyhow::Result<()> {
    let corr: u64 = f
        .header("correlation-id")
        .and_then(|c| c.parse().ok())
        .context("reply without a numeric correlation-id")?;
    let value: u64 = std::str::from_utf8(&f.body)
        .ok()
        .and_then(|b| b.parse().ok())
        .context("reply body is not a number")?;
    if value != corr + 1 {
        bail!("reply {value} to request {corr}");
    }
    let slot = corr
        .checked_sub(first)
        .and_then(|i| seen.get_mut(i as usize))
        .context("reply to a request this client did not send")?;
    if std::mem::replace(slot, true) {
        bail!("reply to request {corr} arrived twice");
    }
    Ok(())
}

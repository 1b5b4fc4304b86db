//! `nagare bench forward`: N connections sending PackedForward chunks with the `chunk`
//! option and waiting for each `{"ack": ...}`, as Fluentd's `out_forward` does with
//! `require_ack_response`. Reports events/s sustained (counted when acked, so against
//! nagare that is events persisted as the flush policy says) and ack latency.
//!
//! Works against any forward receiver (nagare, Fluentd, the OpenTelemetry receiver).
//! `--compress gzip` sends CompressedPackedForward chunks, as Fluentd and Fluent Bit do
//! with `compress gzip`.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::report;

#[derive(Debug, Args)]
pub(crate) struct ForwardArgs {
    /// Forward receiver address.
    #[arg(long, default_value = "127.0.0.1:24224")]
    pub addr: String,
    /// Concurrent connections.
    #[arg(long, short = 'c', default_value_t = 4)]
    pub connections: usize,
    /// Events to send in total (split over the connections).
    #[arg(long, short = 'n', default_value_t = 5_000_000)]
    pub events: u64,
    /// Events per PackedForward chunk.
    #[arg(long, default_value_t = 1000)]
    pub chunk_events: usize,
    /// Approximate size of one event's record in bytes (MessagePack).
    #[arg(long, default_value_t = 100)]
    pub event_size: usize,
    /// Chunks each connection keeps in flight (sent, not yet acked).
    #[arg(long, default_value_t = 2)]
    pub in_flight: usize,
    /// Tag of the events (nagare: the topic, unless a route says otherwise).
    #[arg(long, default_value = "bench.forward")]
    pub tag: String,
    /// Client threads (keep it low: the receiver shares the machine).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Name of the target in the summary.
    #[arg(long, default_value = "nagare")]
    pub target: String,
    /// Compress each chunk's entries (CompressedPackedForward, the `compressed` option).
    #[arg(long, value_enum, default_value_t = Compress::None)]
    pub compress: Compress,
}

/// How a chunk's entries travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Compress {
    /// PackedForward: the entries as they are.
    None,
    /// CompressedPackedForward: the entries as one gzip member.
    Gzip,
}

pub(super) fn run(args: ForwardArgs) -> anyhow::Result<()> {
    if args.connections == 0 || args.chunk_events == 0 || args.in_flight == 0 {
        bail!("connections, chunk-events and in-flight must be at least 1");
    }
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(bench(args))
}

/// The concatenated `[EventTime, {"seq": i, "host": ..., "msg": "..."}]` entries of one
/// chunk, built once and resent (the receiver's work does not depend on which chunk it
/// is; with `--compress`, it depends on how well the text compresses, hence [`Words`]).
fn build_entries(events: usize, event_size: usize) -> Vec<u8> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut out = Vec::with_capacity(events * (event_size + 16));
    // Fixed part of a record: map head, keys, seq, host: about 40 bytes.
    let filler = event_size.saturating_sub(40).max(1);
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    for i in 0..events {
        let msg = words.line(filler);
        out.push(0x92);
        out.extend_from_slice(&[0xd7, 0x00]);
        out.extend_from_slice(&(now.as_secs() as u32).to_be_bytes());
        out.extend_from_slice(&(now.subsec_nanos()).to_be_bytes());
        out.push(0x83);
        put_str(&mut out, "seq");
        out.push(0xce);
        out.extend_from_slice(&(i as u32).to_be_bytes());
        put_str(&mut out, "host");
        put_str(&mut out, "bench-host-01");
        put_str(&mut out, "msg");
        put_str(&mut out, &msg);
    }
    out
}

/// Log-like text: words drawn from a small vocabulary, so a chunk compresses about as
/// much as real logs do (a few times), not to nothing as one repeated line would.
struct Words(u64);

impl Words {
    const VOCABULARY: [&'static str; 16] = [
        "request",
        "served",
        "user",
        "id",
        "path",
        "/api/v1/items",
        "status",
        "200",
        "took",
        "ms",
        "cache",
        "miss",
        "upstream",
        "retry",
        "session",
        "ok",
    ];

    /// A line of exactly `len` bytes.
    fn line(&mut self, len: usize) -> String {
        let mut line = String::with_capacity(len + 16);
        while line.len() < len {
            // xorshift64: any cheap, repeatable sequence will do.
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(Self::VOCABULARY[(self.0 % 16) as usize]);
            if self.0 & 0x30 == 0 {
                line.push_str(&(self.0 >> 40).to_string());
            }
        }
        line.truncate(len);
        line
    }
}

/// The entries as Fluentd's `compress gzip` sends them: one gzip member per chunk.
fn gzip(entries: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(entries)?;
    Ok(enc.finish()?)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n < 256 {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

/// Chunk ids are 16 characters so every ack has the same length (22 bytes).
const CHUNK_ID_LEN: usize = 16;
const ACK_LEN: usize = 5 + 1 + CHUNK_ID_LEN;

fn chunk_id(conn: usize, seq: u64) -> [u8; CHUNK_ID_LEN] {
    let s = format!("{:04x}{:012x}", conn & 0xffff, seq & 0xffff_ffff_ffff);
    let mut id = [0u8; CHUNK_ID_LEN];
    id.copy_from_slice(s.as_bytes());
    id
}

/// `[tag, bin32(entries), {"chunk": id}]` split into the part before the entries and
/// the option map after them (the entries are shared by every chunk).
fn frame_head(tag: &str, entries_len: usize) -> Vec<u8> {
    let mut head = vec![0x93];
    put_str(&mut head, tag);
    head.push(0xc6);
    head.extend_from_slice(&(entries_len as u32).to_be_bytes());
    head
}

fn frame_tail(id: &[u8; CHUNK_ID_LEN], compress: Compress) -> Vec<u8> {
    let gzip = compress == Compress::Gzip;
    let mut tail = vec![if gzip { 0x82 } else { 0x81 }];
    put_str(&mut tail, "chunk");
    tail.push(0xa0 | CHUNK_ID_LEN as u8);
    tail.extend_from_slice(id);
    if gzip {
        put_str(&mut tail, "compressed");
        put_str(&mut tail, "gzip");
    }
    tail
}

fn expected_ack(id: &[u8; CHUNK_ID_LEN]) -> [u8; ACK_LEN] {
    let mut a = [0u8; ACK_LEN];
    a[..5].copy_from_slice(&[0x81, 0xa3, b'a', b'c', b'k']);
    a[5] = 0xa0 | CHUNK_ID_LEN as u8;
    a[6..].copy_from_slice(id);
    a
}

struct Shared {
    /// As sent: gzip-compressed with `--compress gzip`.
    entries: Vec<u8>,
    head: Vec<u8>,
    compress: Compress,
    acked_events: AtomicU64,
    bytes: AtomicU64,
}

async fn bench(args: ForwardArgs) -> anyhow::Result<()> {
    let plain = build_entries(args.chunk_events, args.event_size);
    let entries = match args.compress {
        Compress::None => plain,
        Compress::Gzip => gzip(&plain)?,
    };
    let shared = Arc::new(Shared {
        head: frame_head(&args.tag, entries.len()),
        entries,
        compress: args.compress,
        acked_events: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let total_chunks = args.events.div_ceil(args.chunk_events as u64);
    let per_conn = total_chunks.div_ceil(args.connections as u64);
    let total_events = per_conn * args.connections as u64 * args.chunk_events as u64;
    println!(
        "forward bench: {} connections x {} chunks x {} events (~{} B each, {} KiB/chunk{}), {} in flight per connection, against {}",
        args.connections,
        per_conn,
        args.chunk_events,
        args.event_size,
        shared.entries.len() / 1024,
        if args.compress == Compress::Gzip {
            " gzipped"
        } else {
            ""
        },
        args.in_flight,
        args.addr
    );
    let bar = report::progress(total_events, "events");
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for conn in 0..args.connections {
        let stream = TcpStream::connect(&args.addr)
            .await
            .with_context(|| format!("connecting to {}", args.addr))?;
        stream.set_nodelay(true)?;
        tasks.push(tokio::spawn(connection(
            conn,
            stream,
            shared.clone(),
            per_conn,
            args.in_flight,
            args.chunk_events as u64,
        )));
    }
    let progress = {
        let shared = shared.clone();
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(shared.acked_events.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut hist = report::latency_histogram();
    for t in tasks {
        let h = t.await??;
        hist.add(&h)?;
    }
    let elapsed = t0.elapsed();
    progress.abort();
    bar.set_position(shared.acked_events.load(Ordering::Relaxed));
    bar.finish();
    report::Summary {
        title: "forward PackedForward chunks with ack",
        target: &args.target,
        items: shared.acked_events.load(Ordering::Relaxed),
        bytes: shared.bytes.load(Ordering::Relaxed),
        elapsed,
        latency: Some(&hist),
    }
    .print();
    println!(
        "  {:<14} {:>16.0} /s",
        "chunks acked",
        (shared.acked_events.load(Ordering::Relaxed) / args.chunk_events as u64) as f64
            / elapsed.as_secs_f64()
    );
    Ok(())
}

/// One connection: keeps `in_flight` chunks outstanding; acks come back in order.
async fn connection(
    conn: usize,
    stream: TcpStream,
    shared: Arc<Shared>,
    chunks: u64,
    in_flight: usize,
    chunk_events: u64,
) -> anyhow::Result<Histogram<u64>> {
    let (mut rd, mut wr) = stream.into_split();
    let mut hist = report::latency_histogram();
    let mut outstanding = std::collections::VecDeque::with_capacity(in_flight);
    let mut sent = 0u64;
    let mut ack = [0u8; ACK_LEN];
    while sent < chunks || !outstanding.is_empty() {
        while sent < chunks && outstanding.len() < in_flight {
            let id = chunk_id(conn, sent);
            // One write per chunk: copying ~100 KiB is noise next to the receiver's work.
            let tail = frame_tail(&id, shared.compress);
            let mut frame =
                Vec::with_capacity(shared.head.len() + shared.entries.len() + tail.len());
            frame.extend_from_slice(&shared.head);
            frame.extend_from_slice(&shared.entries);
            frame.extend_from_slice(&tail);
            wr.write_all(&frame).await.context("sending a chunk")?;
            shared
                .bytes
                .fetch_add(frame.len() as u64, Ordering::Relaxed);
            outstanding.push_back((id, Instant::now()));
            sent += 1;
        }
        let Some((id, at)) = outstanding.pop_front() else {
            break;
        };
        rd.read_exact(&mut ack)
            .await
            .context("waiting for an ack (did the receiver close the connection?)")?;
        if ack != expected_ack(&id) {
            bail!(
                "unexpected ack {:?} for chunk {}",
                String::from_utf8_lossy(&ack),
                String::from_utf8_lossy(&id)
            );
        }
        report::record(&mut hist, at.elapsed());
        shared
            .acked_events
            .fetch_add(chunk_events, Ordering::Relaxed);
    }
    let _ = wr.shutdown().await;
    Ok(hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_asked_length_and_vary() {
        let mut words = Words(1);
        let a = words.line(60);
        let b = words.line(60);
        assert_eq!((a.len(), b.len()), (60, 60));
        assert_ne!(a, b);
        assert_eq!(words.line(1).len(), 1);
    }

    #[test]
    fn gzip_tail_names_the_compression() -> anyhow::Result<()> {
        let id = chunk_id(1, 2);
        let tail = frame_tail(&id, Compress::Gzip);
        let map = rmpv::decode::read_value(&mut &tail[..])?;
        let entries = map.as_map().context("a map")?;
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].0.as_str(), Some("compressed"));
        assert_eq!(entries[1].1.as_str(), Some("gzip"));
        let plain = frame_tail(&id, Compress::None);
        assert_eq!(
            rmpv::decode::read_value(&mut &plain[..])?
                .as_map()
                .map(Vec::len),
            Some(1)
        );
        Ok(())
    }

    #[test]
    fn gzipped_entries_inflate_to_the_plain_ones() -> anyhow::Result<()> {
        use std::io::Read;
        let plain = build_entries(100, 100);
        let packed = gzip(&plain)?;
        assert!(packed.len() < plain.len() / 2);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&packed[..]).read_to_end(&mut back)?;
        assert_eq!(back, plain);
        Ok(())
    }
}

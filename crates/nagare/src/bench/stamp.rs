//! Message bodies that carry their own sequence number and send time, so that the
//! receiving side of the queue and fanout benches can check each message arrives exactly
//! once and measure send → delivery latency without any header a broker might drop. Both
//! sides run in one process, so one `Instant` is the clock of both.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Hex sequence number, hex microseconds since the run's start.
const FIELD: usize = 16;
pub(super) const MIN_SIZE: usize = 2 * FIELD;

/// Builds bodies of one size: the stamp, then filler.
pub(super) struct Stamper {
    start: Instant,
    body: Vec<u8>,
}

/// Refuses a body size too small to hold the stamp.
pub(super) fn check_size(size: usize) -> anyhow::Result<()> {
    if size < MIN_SIZE {
        bail!("--size must be at least {MIN_SIZE} bytes (the body carries a sequence number and a send time)");
    }
    Ok(())
}

impl Stamper {
    pub(super) fn new(start: Instant, size: usize, filler: u8) -> anyhow::Result<Stamper> {
        check_size(size)?;
        Ok(Stamper {
            start,
            body: vec![filler; size],
        })
    }

    /// The body of message `seq`, stamped now.
    pub(super) fn body(&mut self, seq: u64) -> &[u8] {
        let micros = self.start.elapsed().as_micros() as u64;
        let stamp = format!("{seq:016x}{micros:016x}");
        self.body[..MIN_SIZE].copy_from_slice(stamp.as_bytes());
        &self.body
    }
}

/// A received body's sequence number and how long ago (by the run's clock) it was sent.
pub(super) fn read(start: Instant, body: &[u8]) -> anyhow::Result<(u64, Duration)> {
    let field = |i: usize| -> anyhow::Result<u64> {
        let text = body
            .get(i * FIELD..(i + 1) * FIELD)
            .and_then(|b| std::str::from_utf8(b).ok())
            .context("message body too short for the bench's stamp")?;
        u64::from_str_radix(text, 16).context("message body without the bench's stamp")
    };
    let seq = field(0)?;
    let sent = Duration::from_micros(field(1)?);
    Ok((seq, start.elapsed().saturating_sub(sent)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips() {
        let start = Instant::now();
        let mut s = Stamper::new(start, 100, b'm').expect("size is enough");
        let body = s.body(12345).to_vec();
        assert_eq!(body.len(), 100);
        assert_eq!(body[99], b'm');
        let (seq, age) = read(start, &body).expect("stamped body");
        assert_eq!(seq, 12345);
        assert!(age < Duration::from_secs(5));
    }

    #[test]
    fn short_sizes_and_foreign_bodies_are_refused() {
        assert!(Stamper::new(Instant::now(), MIN_SIZE - 1, b'm').is_err());
        assert!(read(Instant::now(), b"hello").is_err());
        assert!(read(Instant::now(), &[b'z'; 40]).is_err());
    }
}

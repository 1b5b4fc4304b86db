//! Responses on their way out: in-memory pieces and file ranges, written with as few
//! system calls as possible (one vectored write for everything in memory, `sendfile(2)`
//! for file ranges on plain sockets; on TLS connections file ranges are read and written
//! through the TLS stream).

use std::io::{self, IoSlice};

use bytes::{BufMut, Bytes, BytesMut};
use nagare_core::log::FileSlice;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use nagare_listener::Stream;

/// One piece of a response body.
#[derive(Debug, Clone)]
pub enum Chunk {
    Mem(Bytes),
    /// Record batches sent straight from a segment file.
    File(FileSlice),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Mem(b) => b.len(),
            Chunk::File(f) => f.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a handler answers.
#[derive(Debug)]
pub enum Reply {
    /// An encoded response body (without the response header).
    Body(Bytes),
    /// A response body in pieces, some of them file ranges (Fetch).
    Chunks(Vec<Chunk>),
    /// No response at all (Produce with acks=0).
    Nothing,
}

/// Responses queued on one connection, written out together.
#[derive(Default)]
pub(crate) struct OutQueue {
    chunks: Vec<Chunk>,
    /// Small pieces (response headers) are gathered here to keep the iovec count low.
    scratch: BytesMut,
    bytes: usize,
}

impl OutQueue {
    pub(crate) fn pending_bytes(&self) -> usize {
        self.bytes + self.scratch.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.scratch.is_empty()
    }

    /// Queues one response: size prefix, correlation id, the tagged-field byte of a v1
    /// response header, then the body.
    pub(crate) fn push_response(&mut self, correlation_id: i32, header_v1: bool, reply: Reply) {
        let body_len: usize = match &reply {
            Reply::Body(b) => b.len(),
            Reply::Chunks(c) => c.iter().map(Chunk::len).sum(),
            Reply::Nothing => return,
        };
        let header_len = if header_v1 { 5 } else { 4 };
        self.scratch.put_i32((header_len + body_len) as i32);
        self.scratch.put_i32(correlation_id);
        if header_v1 {
            self.scratch.put_u8(0);
        }
        match reply {
            Reply::Body(b) => self.push_chunk(Chunk::Mem(b)),
            Reply::Chunks(c) => c.into_iter().for_each(|c| self.push_chunk(c)),
            Reply::Nothing => {}
        }
    }

    fn push_chunk(&mut self, chunk: Chunk) {
        if chunk.is_empty() {
            return;
        }
        match chunk {
            // Copying a small piece beats one more iovec.
            Chunk::Mem(b) if b.len() <= 256 => self.scratch.extend_from_slice(&b),
            other => {
                self.seal_scratch();
                self.bytes += other.len();
                self.chunks.push(other);
            }
        }
    }

    fn seal_scratch(&mut self) {
        if !self.scratch.is_empty() {
            let b = self.scratch.split().freeze();
            self.bytes += b.len();
            self.chunks.push(Chunk::Mem(b));
        }
    }

    /// Writes everything queued: runs of in-memory chunks with vectored writes, file
    /// ranges with sendfile.
    pub(crate) async fn flush(&mut self, stream: &mut Stream) -> io::Result<()> {
        self.seal_scratch();
        let mut chunks = std::mem::take(&mut self.chunks);
        if stream.plain_tcp().is_none() {
            // TLS: record data is encrypted in user space anyway, so small file ranges are
            // read into memory and go out with the headers around them in one vectored
            // write (fewer TLS records and system calls); large ones are streamed.
            for c in chunks.iter_mut() {
                if let Chunk::File(f) = c {
                    if f.len as usize <= TLS_INLINE_MAX {
                        *c = Chunk::Mem(read_slice(f)?);
                    }
                }
            }
        }
        self.bytes = 0;
        let mut i = 0;
        while i < chunks.len() {
            match &chunks[i] {
                Chunk::File(f) => {
                    send_file(stream, f).await?;
                    i += 1;
                }
                Chunk::Mem(_) => {
                    let run_end = chunks[i..]
                        .iter()
                        .position(|c| matches!(c, Chunk::File(_)))
                        .map_or(chunks.len(), |p| i + p);
                    write_all_vectored(stream, &chunks[i..run_end]).await?;
                    i = run_end;
                }
            }
        }
        Ok(())
    }
}

/// Writes in-memory chunks with as few `writev` calls as the kernel allows.
async fn write_all_vectored(stream: &mut Stream, chunks: &[Chunk]) -> io::Result<()> {
    let mut bufs: Vec<&[u8]> = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Mem(b) => Some(&b[..]),
            Chunk::File(_) => None,
        })
        .collect();
    let mut first = 0;
    while first < bufs.len() {
        // IOV_MAX is 1024 on Linux.
        let end = bufs.len().min(first + 1024);
        let slices: Vec<IoSlice<'_>> = bufs[first..end].iter().map(|b| IoSlice::new(b)).collect();
        let mut n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 && first < bufs.len() {
            if n >= bufs[first].len() {
                n -= bufs[first].len();
                first += 1;
            } else {
                bufs[first] = &bufs[first][n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// Sends a file range to the socket with `sendfile(2)`: the record data never enters
/// user space.
///
/// Why this way: the tokio socket is non-blocking, so `sendfile` on it returns `EAGAIN`
/// when the send buffer is full, exactly like `write`. Running it inside `try_io` with
/// write readiness lets tokio clear the readiness on `EAGAIN` and wake us when the socket
/// drains, without a blocking-pool thread per fetch and without a second (dup'ed) blocking
/// handle that would race with the async writes of the response headers. The file side
/// reads from the page cache; a read from disk blocks this worker briefly, as Kafka's
/// network threads do.
async fn send_file(stream: &mut Stream, slice: &FileSlice) -> io::Result<()> {
    let Some(tcp) = stream.plain_tcp() else {
        return copy_file(stream, slice).await;
    };
    let result = sendfile_all(tcp, slice).await;
    // The bytes went around the stream's own accounting: tell its idle clock and its
    // byte count (on error, some may not have gone; close enough for a connection's
    // traffic figure).
    stream.sent_around(u64::from(slice.len));
    result
}

async fn sendfile_all(stream: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let mut offset = slice.position;
    let end = slice.position + slice.len as u64;
    while offset < end {
        stream.writable().await?;
        let want = (end - offset).min(1 << 30) as usize;
        let result = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*slice.file, Some(&mut offset), want)
                .map_err(io::Error::from)
        });
        match result {
            Ok(0) => {
                // The segment shrank under us (retention, truncation): the response can no
                // longer be completed, so the connection must go.
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file shrank during sendfile",
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// File ranges up to this size are read into memory on TLS connections.
const TLS_INLINE_MAX: usize = 256 * 1024;

/// Reads a whole file range (from the page cache, like sendfile would).
fn read_slice(slice: &FileSlice) -> io::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; slice.len as usize];
    slice.file.read_exact_at(&mut buf, slice.position)?;
    Ok(Bytes::from(buf))
}

/// The path for TLS connections, where the kernel cannot encrypt (no kernel TLS): the
/// file range is read through a bounded buffer and written through the TLS stream. The
/// reads come from the page cache like sendfile's, on this worker, as Kafka's network
/// threads do.
async fn copy_file(stream: &mut Stream, slice: &FileSlice) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 256 * 1024;
    let mut buf = vec![0u8; CHUNK.min(slice.len as usize)];
    let mut offset = slice.position;
    let end = slice.position + slice.len as u64;
    while offset < end {
        let want = ((end - offset) as usize).min(buf.len());
        let n = slice.file.read_at(&mut buf[..want], offset)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file shrank during a fetch",
            ));
        }
        stream.write_all(&buf[..n]).await?;
        offset += n as u64;
    }
    Ok(())
}

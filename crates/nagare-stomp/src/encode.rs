//! Frame encoding straight into an output buffer, escaping headers as the version says.

use bytes::{BufMut, BytesMut};

use crate::frame::{Command, Frame, Version};

/// Writes one frame: `begin`, any number of `header`, then `body` (which ends it).
pub struct FrameWriter<'a> {
    out: &'a mut BytesMut,
    version: Version,
    escape: bool,
}

impl<'a> FrameWriter<'a> {
    pub fn begin(out: &'a mut BytesMut, version: Version, command: Command) -> FrameWriter<'a> {
        out.put_slice(command.as_str().as_bytes());
        out.put_u8(b'\n');
        FrameWriter {
            out,
            version,
            escape: command.escapes_headers(),
        }
    }

    /// A writer of header lines only, for a frame whose command line is written apart.
    pub(crate) fn headers_only(
        out: &'a mut BytesMut,
        version: Version,
        command: Command,
    ) -> FrameWriter<'a> {
        FrameWriter {
            out,
            version,
            escape: command.escapes_headers(),
        }
    }

    /// Header lines encoded beforehand by a [`headers_only`](Self::headers_only) writer
    /// of the same version and command.
    pub(crate) fn encoded(&mut self, lines: &[u8]) -> &mut Self {
        self.out.put_slice(lines);
        self
    }

    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        self.put_escaped(name);
        self.out.put_u8(b':');
        self.put_escaped(value);
        self.out.put_u8(b'\n');
        self
    }

    /// Ends the frame with a `content-length` header (when `with_length`), the body and NUL.
    pub fn body(self, body: &[u8], with_length: bool) {
        if with_length {
            self.out.put_slice(b"content-length:");
            self.out
                .put_slice(itoa::Buffer::new().format(body.len()).as_bytes());
            self.out.put_u8(b'\n');
        }
        self.out.put_u8(b'\n');
        self.out.put_slice(body);
        self.out.put_u8(0);
    }

    fn put_escaped(&mut self, s: &str) {
        let bytes = s.as_bytes();
        if !needs_escape(bytes) {
            self.out.put_slice(bytes);
            return;
        }
        // Runs between special bytes are copied whole: a topic message id
        // (`topic@partition:offset`) has a colon in every MESSAGE of a fan-out.
        let mut run = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if SPECIAL[b as usize] {
                self.out.put_slice(&bytes[run..i]);
                self.put_special(b);
                run = i + 1;
            }
        }
        self.out.put_slice(&bytes[run..]);
    }

    /// One of `\n`, `\r`, `:`, `\\` as this frame's version and command write it.
    fn put_special(&mut self, b: u8) {
        match (self.escape, self.version, b) {
            // 1.0 and the CONNECT family have no escapes: keep the frame well formed.
            (false, _, b'\n' | b'\r') | (_, Version::V1_0, b'\n' | b'\r') => self.out.put_u8(b' '),
            (false, _, _) | (_, Version::V1_0, _) => self.out.put_u8(b),
            (true, _, b'\n') => self.out.put_slice(b"\\n"),
            (true, Version::V1_2, b'\r') => self.out.put_slice(b"\\r"),
            (true, _, b'\r') => self.out.put_u8(b' '),
            (true, _, b':') => self.out.put_slice(b"\\c"),
            (true, _, b'\\') => self.out.put_slice(b"\\\\"),
            (true, _, other) => self.out.put_u8(other),
        }
    }
}

/// The bytes header escaping changes (`\n`, `\r`, `:`, `\`).
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[b':' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Whether `bytes` holds a byte that header escaping changes (`\n`, `\r`, `:`, `\`).
///
/// Nearly every header needs no escaping, and most are short (names, ids, destinations):
/// below 64 bytes one table lookup per byte beats two vectorised scans, whose set-up
/// showed in the RPC profile (several headers per MESSAGE). Longer values still get the
/// scans.
fn needs_escape(bytes: &[u8]) -> bool {
    const SHORT: usize = 64;
    if bytes.len() < SHORT {
        bytes.iter().any(|&b| SPECIAL[b as usize])
    } else {
        memchr::memchr3(b'\n', b'\r', b':', bytes).is_some()
            || memchr::memchr(b'\\', bytes).is_some()
    }
}

/// Encodes a whole [`Frame`]; a body (or a SEND/MESSAGE) gets a `content-length`.
pub fn encode(frame: &Frame, version: Version, out: &mut BytesMut) {
    let mut w = FrameWriter::begin(out, version, frame.command);
    for (k, v) in frame.headers.iter() {
        if k != "content-length" {
            w.header(k, v);
        }
    }
    let with_length =
        !frame.body.is_empty() || matches!(frame.command, Command::Send | Command::Message);
    w.body(&frame.body, with_length);
}

#[cfg(test)]
mod tests {
    use super::needs_escape;

    #[test]
    fn finds_every_special_byte_in_short_and_long_values() {
        for len in [0usize, 1, 5, 63, 64, 65, 300] {
            let plain = vec![b'a'; len];
            assert!(!needs_escape(&plain), "{len}");
            for special in [b'\n', b'\r', b':', b'\\'] {
                for at in [0, len / 2, len.saturating_sub(1)] {
                    if at < len {
                        let mut v = plain.clone();
                        v[at] = special;
                        assert!(needs_escape(&v), "{len} {at} {special}");
                    }
                }
            }
        }
    }
}

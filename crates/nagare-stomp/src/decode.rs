//! Sans-io frame decoder: feed it a buffer, get whole frames out. Bounded by [`Limits`];
//! remembers how far it has scanned so a frame arriving in many reads costs one pass.
//!
//! [`Decoder::decode`] parses every header of a frame (what a broker does with what a
//! client sends). [`Decoder::decode_raw`] only finds where a frame ends and leaves its
//! header lines as received, for a client that reads many frames and looks at few of
//! their headers: a load generator's subscriber spent half its time parsing headers it
//! never read.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::FrameError;
use crate::frame::{Command, Frame, Version};
use crate::headers::Headers;

/// Bounds on what a peer may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest frame (headers and body) accepted.
    pub max_frame_bytes: usize,
    /// Most headers in one frame.
    pub max_headers: usize,
    /// Longest header line (name, colon and value).
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 4 * 1024 * 1024,
            max_headers: 128,
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Spare bytes in a frame's header text for a value the broker rewrites.
const REWRITE_ROOM: usize = 64;

/// The head of a frame whose body has not fully arrived yet.
#[derive(Debug)]
struct Head {
    command: Command,
    /// Parsed by [`Decoder::decode`]; left as text by [`Decoder::decode_raw`].
    headers: Option<Headers>,
    /// The header block (command line included) ends here, at the blank line's `\n`.
    block_end: usize,
    body_start: usize,
    content_length: Option<usize>,
}

/// A frame whose header lines are kept as received, not parsed ([`Decoder::decode_raw`]).
#[derive(Debug, Clone)]
pub struct RawFrame {
    pub command: Command,
    /// The command line and the header lines, up to the blank line's `\n`.
    pub head: Bytes,
    pub body: Bytes,
    /// The version the head was read under (it decides header escaping).
    pub version: Version,
}

impl RawFrame {
    /// Parses the header lines, as [`Decoder::decode`] would have, within `limits`.
    pub fn to_frame(&self, limits: &Limits) -> Result<Frame, FrameError> {
        let (command, headers, _) = parse_head(&self.head, self.version, limits)?;
        Ok(Frame {
            command,
            headers,
            body: self.body.clone(),
        })
    }
}

#[derive(Debug)]
pub struct Decoder {
    /// Decides header escaping; the connection sets it once CONNECT is negotiated.
    pub version: Version,
    limits: Limits,
    /// Bytes of the current frame already searched (for the blank line or the NUL).
    scanned: usize,
    head: Option<Head>,
}

impl Decoder {
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            version: Version::V1_0,
            limits,
            scanned: 0,
            head: None,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Takes one whole frame off the front of `buf`, `Ok(None)` if more bytes are needed.
    /// Line ends between frames (heart-beats) and stray NULs (a client that ends frames
    /// with `\0\n`-style padding or doubles the terminator) are consumed silently.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if self.head.is_none() {
            let Some(end) = self.find_head(buf)? else {
                return Ok(None);
            };
            let (command, headers, content_length) =
                parse_head(&buf[..end], self.version, &self.limits)?;
            self.start_body(command, Some(headers), end, content_length);
        }
        let Some((head, frame)) = self.take_frame(buf)? else {
            return Ok(None);
        };
        let headers = match head.headers {
            Some(h) => h,
            // The head was found by `decode_raw`: parse it now.
            None => parse_head(&frame[..head.block_end], self.version, &self.limits)?.1,
        };
        Ok(Some(Frame {
            command: head.command,
            headers,
            body: frame.slice(head.body_start..frame.len() - 1),
        }))
    }

    /// Takes one whole frame off the front of `buf` like [`decode`](Self::decode), but
    /// reads of its header lines only `content-length` (to find the frame's end): no
    /// header is unescaped, checked or copied until [`RawFrame::to_frame`] asks. The
    /// frame's size stays bounded by `max_frame_bytes`.
    pub fn decode_raw(&mut self, buf: &mut BytesMut) -> Result<Option<RawFrame>, FrameError> {
        if self.head.is_none() {
            let Some(end) = self.find_head(buf)? else {
                return Ok(None);
            };
            let block = &buf[..end];
            let command = parse_command(block)?;
            let content_length = raw_content_length(block, &self.limits)?;
            self.start_body(command, None, end, content_length);
        }
        let Some((head, frame)) = self.take_frame(buf)? else {
            return Ok(None);
        };
        Ok(Some(RawFrame {
            command: head.command,
            head: frame.slice(..head.block_end),
            body: frame.slice(head.body_start..frame.len() - 1),
            version: self.version,
        }))
    }

    /// Skips what comes between frames and finds the end of the next header block.
    fn find_head(&mut self, buf: &mut BytesMut) -> Result<Option<usize>, FrameError> {
        if self.scanned == 0 && !skip_line_ends(buf)? {
            return Ok(None);
        }
        self.find_blank_line(buf)
    }

    /// Remembers a frame's head (its block ends at the blank line's `\n`, `end`).
    fn start_body(
        &mut self,
        command: Command,
        headers: Option<Headers>,
        end: usize,
        content_length: Option<usize>,
    ) {
        let body_start = end + 1;
        self.scanned = body_start;
        self.head = Some(Head {
            command,
            headers,
            block_end: end,
            body_start,
            content_length,
        });
    }

    /// Once the body and its NUL are buffered: the head and the whole frame (NUL
    /// included), taken off `buf`.
    fn take_frame(&mut self, buf: &mut BytesMut) -> Result<Option<(Head, Bytes)>, FrameError> {
        let head = self
            .head
            .as_ref()
            .expect("a head is parsed before its body");
        let nul = match head.content_length {
            Some(len) => {
                let nul = head.body_start + len;
                if buf.len() <= nul {
                    return Ok(None);
                }
                if buf[nul] != 0 {
                    return Err(FrameError::MissingNul(len));
                }
                nul
            }
            None => match memchr(0, &buf[self.scanned..]) {
                Some(i) if self.scanned + i - head.body_start > self.limits.max_frame_bytes => {
                    return Err(FrameError::TooLarge {
                        limit: self.limits.max_frame_bytes,
                    });
                }
                Some(i) => self.scanned + i,
                None => {
                    self.scanned = buf.len();
                    if buf.len() - head.body_start > self.limits.max_frame_bytes {
                        return Err(FrameError::TooLarge {
                            limit: self.limits.max_frame_bytes,
                        });
                    }
                    return Ok(None);
                }
            },
        };
        let head = self.head.take().expect("checked above");
        self.scanned = 0;
        Ok(Some((head, buf.split_to(nul + 1).freeze())))
    }

    /// Index of the `\n` that ends the header block (the blank line), if it is buffered.
    fn find_blank_line(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let mut from = self.scanned;
        while let Some(i) = memchr(b'\n', &buf[from..]) {
            let j = from + i;
            if j >= 1
                && (buf[j - 1] == b'\n' || (j >= 2 && buf[j - 1] == b'\r' && buf[j - 2] == b'\n'))
            {
                // The same bound whether the block came in one read or many.
                if j > self.limits.max_frame_bytes {
                    return Err(FrameError::TooLarge {
                        limit: self.limits.max_frame_bytes,
                    });
                }
                return Ok(Some(j));
            }
            from = j + 1;
        }
        // Re-check the last two bytes next time: the blank line may straddle reads.
        self.scanned = buf.len().saturating_sub(2);
        if buf.len() > self.limits.max_frame_bytes {
            return Err(FrameError::TooLarge {
                limit: self.limits.max_frame_bytes,
            });
        }
        Ok(None)
    }
}

/// Parses a header block (command line included, blank line excluded): the command,
/// the headers unescaped, and the body's length if `content-length` gives it.
fn parse_head(
    block: &[u8],
    version: Version,
    limits: &Limits,
) -> Result<(Command, Headers, Option<usize>), FrameError> {
    let command = parse_command(block)?;
    let rest = match memchr(b'\n', block) {
        Some(i) => &block[i + 1..],
        None => &block[block.len()..],
    };
    let escaped = command.escapes_headers() && version != Version::V1_0;
    // Names and values are unescaped into one string (see `Headers`): its size is
    // at most the block's, plus room for a SEND's `reply-to` rewritten in place
    // (`/reply-queue/<id>`) without growing it.
    let mut headers = Headers::with_capacity(block.len() + REWRITE_ROOM, 8);
    let mut content_length = None;
    // One UTF-8 check for every header line: pieces cut at the ASCII `\n` and `:`
    // stay valid, so names and values need no check of their own (checking each
    // showed in the RPC profile).
    let rest = std::str::from_utf8(rest).map_err(|_| FrameError::NotUtf8)?;
    let bytes = rest.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let line = scan_line(bytes, at);
        let (end, next) = (line.end, line.next);
        if end == at {
            at = next;
            continue; // the blank line itself
        }
        if end - at > limits.max_header_bytes {
            return Err(FrameError::HeaderTooLong {
                limit: limits.max_header_bytes,
            });
        }
        if headers.len() == limits.max_headers {
            return Err(FrameError::TooManyHeaders {
                limit: limits.max_headers,
            });
        }
        let colon = line.colon.ok_or(FrameError::MissingColon)?;
        let (name, value) = (&rest[at..colon], &rest[colon + 1..end]);
        // Most lines have no escape at all: they are copied without looking again.
        let unescape = escaped && line.backslash;
        headers.push_with(|text| {
            unescape_into(text, name, unescape, version)?;
            let value_start = text.len();
            unescape_into(text, value, unescape, version)?;
            Ok::<_, FrameError>(value_start)
        })?;
        // No escape sequence can produce `content-length`: the raw name decides.
        if content_length.is_none() && name == "content-length" {
            let value = headers.value(headers.len() - 1).unwrap_or_default();
            let len: usize = value
                .parse()
                .map_err(|_| FrameError::BadContentLength(value.to_string()))?;
            if len > limits.max_frame_bytes {
                return Err(FrameError::TooLarge {
                    limit: limits.max_frame_bytes,
                });
            }
            content_length = Some(len);
        }
        at = next;
    }
    Ok((command, headers, content_length))
}

/// One header line as [`scan_line`] saw it.
struct Line {
    /// Where its text ends: at its `\n`, or the `\r` before it (or the end of the block).
    end: usize,
    /// Where the next line starts.
    next: usize,
    /// Index of its first `:`.
    colon: Option<usize>,
    /// Whether it has a `\` (an escape to undo).
    backslash: bool,
}

/// Finds the end of the line starting at `from`, its first colon and whether it has a
/// backslash, in one pass. Header lines are short (tens of bytes): one loop over them is
/// cheaper than the three searches (line end, colon, escapes) it replaces, whose set-up
/// cost dominated for lines this short in the profile of a fan-out subscriber.
fn scan_line(bytes: &[u8], from: usize) -> Line {
    let mut colon = None;
    let mut backslash = false;
    for (i, &b) in bytes[from..].iter().enumerate() {
        match b {
            b'\n' => {
                let line = strip_cr(&bytes[from..from + i]);
                return Line {
                    end: from + line.len(),
                    next: from + i + 1,
                    colon,
                    backslash,
                };
            }
            b':' if colon.is_none() => colon = Some(from + i),
            b'\\' => backslash = true,
            _ => {}
        }
    }
    Line {
        end: from + strip_cr(&bytes[from..]).len(),
        next: bytes.len(),
        colon,
        backslash,
    }
}

/// The command on a header block's first line.
fn parse_command(block: &[u8]) -> Result<Command, FrameError> {
    let line = match memchr(b'\n', block) {
        Some(i) => &block[..i],
        None => block,
    };
    let line = strip_cr(line);
    Command::parse(line).ok_or_else(|| {
        FrameError::UnknownCommand(String::from_utf8_lossy(&line[..line.len().min(64)]).into())
    })
}

/// The first `content-length` of a header block, found with one substring search instead
/// of a pass over each line. Its raw name decides, as in [`parse_head`] (no escape sequence
/// can produce that name), and a value that is not a length is refused the same way.
fn raw_content_length(block: &[u8], limits: &Limits) -> Result<Option<usize>, FrameError> {
    let Some(at) = memchr::memmem::find(block, b"\ncontent-length:") else {
        return Ok(None);
    };
    let value = &block[at + b"\ncontent-length:".len()..];
    let value = match memchr(b'\n', value) {
        Some(i) => &value[..i],
        None => value,
    };
    let value = strip_cr(value);
    let len: usize = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| FrameError::BadContentLength(String::from_utf8_lossy(value).into()))?;
    if len > limits.max_frame_bytes {
        return Err(FrameError::TooLarge {
            limit: limits.max_frame_bytes,
        });
    }
    Ok(Some(len))
}

/// Drops `\n`, `\r\n` and NULs before a frame; false if the buffer ends inside a `\r\n`.
fn skip_line_ends(buf: &mut BytesMut) -> Result<bool, FrameError> {
    loop {
        match buf.first() {
            Some(b'\n' | 0) => buf.advance(1),
            Some(b'\r') => match buf.get(1) {
                None => return Ok(false),
                Some(b'\n') => buf.advance(2),
                Some(_) => return Err(FrameError::BareCarriageReturn),
            },
            _ => return Ok(true),
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

/// Undoes header escaping into `out`: 1.2 knows `\r \n \c \\`, 1.1 the same without `\r`,
/// 1.0 none.
fn unescape_into(
    out: &mut String,
    text: &str,
    escaped: bool,
    version: Version,
) -> Result<(), FrameError> {
    if !escaped {
        out.push_str(text);
        return Ok(());
    }
    // Runs between escapes are copied whole (a topic message id has one `\c` in each).
    let mut rest = text;
    while let Some(i) = memchr(b'\\', rest.as_bytes()) {
        out.push_str(&rest[..i]);
        // The byte after the backslash: an ASCII letter or `\\` when valid, so slicing
        // past it stays on a char boundary.
        let replaced = match rest.as_bytes().get(i + 1) {
            Some(b'n') => '\n',
            Some(b'c') => ':',
            Some(b'\\') => '\\',
            Some(b'r') if version == Version::V1_2 => '\r',
            Some(_) => {
                let other = rest[i + 1..].chars().next().unwrap_or(' ');
                return Err(FrameError::BadEscape(other));
            }
            None => return Err(FrameError::BadEscape(' ')),
        };
        out.push(replaced);
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    Ok(())
}

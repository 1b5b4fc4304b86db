//! The raw STOMP client the STOMP benches share (rpc, queue, fanout): connection settings
//! per broker, CONNECT, a frame reader and a frame builder. No client library sits between
//! the workload and the wire, so the same bytes go to nagare, RabbitMQ and ActiveMQ.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{BufMut, BytesMut};
use clap::{Args, ValueEnum};
use nagare_stomp::{Command, Decoder, Frame, Limits, RawFrame, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Which broker a STOMP bench talks to: each has its own habits (login, vhost, temp queues).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Flavor {
    Nagare,
    Rabbitmq,
    Activemq,
}

impl Flavor {
    /// The port the peers scripts run it on.
    pub(super) fn default_port(self) -> u16 {
        match self {
            Flavor::Nagare | Flavor::Rabbitmq => 61613,
            Flavor::Activemq => 61614,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Flavor::Nagare => "nagare",
            Flavor::Rabbitmq => "rabbitmq",
            Flavor::Activemq => "activemq",
        }
    }
}

/// The broker flags of the queue and fanout benches.
#[derive(Debug, Args)]
pub(crate) struct BrokerArgs {
    /// Which broker (sets the defaults of address, login and vhost).
    #[arg(long, value_enum, default_value = "nagare")]
    pub flavor: Flavor,
    /// STOMP address. Default: 127.0.0.1:61613 (nagare, RabbitMQ), 127.0.0.1:61614
    /// (ActiveMQ as the peers script runs it).
    #[arg(long)]
    pub addr: Option<String>,
    /// Default: guest for RabbitMQ, none otherwise.
    #[arg(long)]
    pub login: Option<String>,
    /// Default: guest for RabbitMQ, none otherwise.
    #[arg(long)]
    pub passcode: Option<String>,
    /// CONNECT `host` header (RabbitMQ reads it as the vhost). Default: `/` for RabbitMQ,
    /// the address's host otherwise.
    #[arg(long)]
    pub vhost: Option<String>,
}

impl BrokerArgs {
    pub(super) fn conn(&self) -> Conn {
        let addr = self
            .addr
            .clone()
            .unwrap_or_else(|| format!("127.0.0.1:{}", self.flavor.default_port()));
        Conn::new(
            self.flavor,
            addr,
            self.login.clone(),
            self.passcode.clone(),
            self.vhost.clone(),
            None,
        )
    }
}

/// Connection settings resolved from the flavor and the overrides.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub addr: String,
    pub login: Option<String>,
    pub passcode: Option<String>,
    pub vhost: String,
    /// The requester SUBSCRIBEs to its own temp queue (ActiveMQ needs it; RabbitMQ delivers
    /// without; nagare accepts either).
    pub temp_subscribe: bool,
    pub name: &'static str,
}

impl Conn {
    pub(super) fn new(
        flavor: Flavor,
        addr: String,
        login: Option<String>,
        passcode: Option<String>,
        vhost: Option<String>,
        temp_subscribe: Option<bool>,
    ) -> Conn {
        let host = addr
            .rsplit_once(':')
            .map_or(addr.as_str(), |(h, _)| h)
            .to_string();
        let (default_login, default_vhost, default_temp) = match flavor {
            Flavor::Nagare => (None, host, false),
            Flavor::Rabbitmq => (Some("guest"), "/".to_string(), false),
            Flavor::Activemq => (None, host, true),
        };
        Conn {
            addr,
            login: login.or(default_login.map(str::to_string)),
            passcode: passcode.or(default_login.map(str::to_string)),
            vhost: vhost.unwrap_or(default_vhost),
            temp_subscribe: temp_subscribe.unwrap_or(default_temp),
            name: flavor.name(),
        }
    }
}

/// The reading side of a STOMP connection: a buffer and a decoder.
pub(super) struct Reader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    decoder: Decoder,
}

impl Reader {
    /// The next frame (reading as needed); ERROR frames are errors.
    pub(super) async fn next(&mut self) -> anyhow::Result<Frame> {
        let f = self.next_any().await?;
        fail_on_error(&f)?;
        Ok(f)
    }

    /// The next frame, ERROR frames included. Cancel-safe: a frame is only taken from the
    /// buffer once complete, and a cancelled read has read nothing.
    pub(super) async fn next_any(&mut self) -> anyhow::Result<Frame> {
        self.read_one(Decoder::decode).await
    }

    /// Every frame already buffered, reading once if there is none (ERROR included).
    pub(super) async fn next_batch(&mut self, out: &mut Vec<Frame>) -> anyhow::Result<()> {
        self.read_batch(Decoder::decode, out).await
    }

    /// Every frame already buffered, reading once if there is none, with their header
    /// lines left unparsed (ERROR included): for a subscriber that only reads bodies, so
    /// that the load generator is not what limits a fan-out run.
    pub(super) async fn next_raw_batch(&mut self, out: &mut Vec<RawFrame>) -> anyhow::Result<()> {
        self.read_batch(Decoder::decode_raw, out).await
    }

    /// The next frame `decode` takes off the buffer, reading until there is one.
    async fn read_one<F, E>(
        &mut self,
        decode: impl Fn(&mut Decoder, &mut BytesMut) -> Result<Option<F>, E>,
    ) -> anyhow::Result<F>
    where
        anyhow::Error: From<E>,
    {
        loop {
            if let Some(f) = decode(&mut self.decoder, &mut self.buf)? {
                return Ok(f);
            }
            self.buf.reserve(64 * 1024);
            if self.rd.read_buf(&mut self.buf).await? == 0 {
                bail!("connection closed by the broker");
            }
        }
    }

    /// The next frame and every one already buffered behind it.
    async fn read_batch<F, E>(
        &mut self,
        decode: impl Fn(&mut Decoder, &mut BytesMut) -> Result<Option<F>, E> + Copy,
        out: &mut Vec<F>,
    ) -> anyhow::Result<()>
    where
        anyhow::Error: From<E>,
    {
        out.push(self.read_one(decode).await?);
        while let Some(f) = decode(&mut self.decoder, &mut self.buf)? {
            out.push(f);
        }
        Ok(())
    }

    /// An ERROR frame read raw as an error, parsed for its `message` header.
    pub(super) fn fail_on_raw_error(&self, f: &RawFrame) -> anyhow::Result<()> {
        if f.command == Command::Error {
            fail_on_error(&f.to_frame(self.decoder.limits())?)?;
        }
        Ok(())
    }

    /// Reads until a frame with `command` (others are skipped), within `limit`.
    pub(super) async fn expect(
        &mut self,
        command: Command,
        limit: Duration,
        what: &str,
    ) -> anyhow::Result<Frame> {
        tokio::time::timeout(limit, self.wait_for(command))
            .await
            .with_context(|| format!("no {command:?} for {what} within {limit:?}"))?
    }

    /// Reads until a frame with `command` (others are skipped), without a limit of its own.
    pub(super) async fn wait_for(&mut self, command: Command) -> anyhow::Result<Frame> {
        loop {
            let f = self.next().await?;
            if f.command == command {
                return Ok(f);
            }
        }
    }

    /// The negotiated protocol version (ACK headers depend on it).
    pub(super) fn version(&self) -> Version {
        self.decoder.version
    }
}

/// A connected STOMP client connection.
pub(super) struct Stomp {
    pub rd: Reader,
    pub wr: OwnedWriteHalf,
}

/// How long CONNECT and SUBSCRIBE may take before the bench gives up.
pub(super) const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

impl Stomp {
    pub(super) async fn connect(conn: &Conn) -> anyhow::Result<Stomp> {
        tokio::time::timeout(SETUP_TIMEOUT, Stomp::connect_unbounded(conn))
            .await
            .with_context(|| {
                format!("CONNECT to {} not answered in {SETUP_TIMEOUT:?}", conn.addr)
            })?
    }

    async fn connect_unbounded(conn: &Conn) -> anyhow::Result<Stomp> {
        let stream = TcpStream::connect(&conn.addr)
            .await
            .with_context(|| format!("connecting to {}", conn.addr))?;
        stream.set_nodelay(true)?;
        let (rd, wr) = stream.into_split();
        let mut s = Stomp {
            rd: Reader {
                rd,
                buf: BytesMut::with_capacity(256 * 1024),
                decoder: Decoder::new(Limits::default()),
            },
            wr,
        };
        let mut f = format!(
            "CONNECT\naccept-version:1.1,1.2\nhost:{}\nheart-beat:0,0\n",
            conn.vhost
        );
        if let Some(l) = &conn.login {
            f.push_str(&format!("login:{l}\n"));
        }
        if let Some(p) = &conn.passcode {
            f.push_str(&format!("passcode:{p}\n"));
        }
        f.push_str("\n\0");
        s.wr.write_all(f.as_bytes()).await?;
        let reply = s.rd.next().await?;
        if reply.command != Command::Connected {
            bail!(
                "CONNECT refused: {:?} {}",
                reply.headers,
                String::from_utf8_lossy(&reply.body)
            );
        }
        s.rd.decoder.version = reply
            .header("version")
            .and_then(Version::parse)
            .unwrap_or(Version::V1_0);
        Ok(s)
    }

    /// SUBSCRIBEs and waits for the RECEIPT, so that what is sent afterwards reaches the
    /// subscription. `extra` holds more `name:value` header lines.
    pub(super) async fn subscribe(
        &mut self,
        id: &str,
        dest: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let mut out = BytesMut::new();
        let mut headers = vec![("id", id), ("destination", dest), ("receipt", "sub")];
        headers.extend_from_slice(extra);
        put_frame(&mut out, "SUBSCRIBE", &headers, None);
        self.wr.write_all(&out).await?;
        self.rd
            .expect(
                Command::Receipt,
                SETUP_TIMEOUT,
                &format!("SUBSCRIBE {dest}"),
            )
            .await?;
        Ok(())
    }
}

/// Appends one frame. Header values are written as given: the benches' never need escaping.
/// A body gets a `content-length`.
pub(super) fn put_frame(
    out: &mut BytesMut,
    command: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) {
    out.put_slice(command.as_bytes());
    out.put_u8(b'\n');
    for (k, v) in headers {
        out.put_slice(k.as_bytes());
        out.put_u8(b':');
        out.put_slice(v.as_bytes());
        out.put_u8(b'\n');
    }
    if let Some(b) = body {
        out.put_slice(b"content-length:");
        out.put_slice(b.len().to_string().as_bytes());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    if let Some(b) = body {
        out.put_slice(b);
    }
    out.put_u8(0);
}

pub(super) fn fail_on_error(f: &Frame) -> anyhow::Result<()> {
    if f.command == Command::Error {
        bail!(
            "ERROR from broker: {:?} {}",
            f.header("message"),
            String::from_utf8_lossy(&f.body)
        );
    }
    Ok(())
}

/// A destination name unique to this run, so that a broker's leftovers from an earlier
/// run (queued or unacknowledged messages) never reach this one.
pub(super) fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{}", std::process::id(), nanos % 1_000_000)
}

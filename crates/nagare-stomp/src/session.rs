//! The state of one connection, owned by its reading task: negotiated version,
//! subscriptions, temp queues and open transactions. Its fields are private: the handlers
//! (one file per command in `session/handlers/`) are methods on it, and the connection
//! loop reads what it needs through accessors.

mod handlers;

pub(crate) use handlers::send::Append;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use nagare_core::queues::{ConsumerId, Queue, Queues};
use nagare_core::security::Security;
use nagare_core::Broker;
use nagare_listener::ConnectionInfo;
use tokio::task::JoinHandle;

use crate::access::Access;
use crate::command::Request;
use crate::config::Config;
use crate::dest::Dest;
use crate::encode::FrameWriter;
use crate::error::StompError;
use crate::frame::{Command, Version};
use crate::temp::TempQueues;
use crate::writer::ConnOut;

/// Shared by every connection of the listener.
pub(crate) struct Shared {
    pub broker: Arc<Broker>,
    pub config: Config,
    pub queues: Arc<Queues>,
    /// Users, ACLs and the failed-login throttle.
    pub security: Security,
    pub temp: TempQueues,
    /// Bytes of topic messages waiting to be written, over all connections.
    pub outbound: crate::writer::GlobalBudget,
    pub next_conn: AtomicU64,
    pub next_message: AtomicU64,
    /// Cluster mode: replies to temp queues of other gateways go through this router.
    pub replies: Option<Arc<dyn nagare_core::store::ReplyRouter>>,
    /// What this gateway's temp-queue ids start with (empty with the embedded log).
    pub temp_prefix: String,
}

/// Ack modes of SUBSCRIBE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckMode {
    Auto,
    /// Cumulative: an ACK settles every earlier message of the subscription too.
    Client,
    ClientIndividual,
}

impl AckMode {
    pub(crate) fn parse(v: Option<&str>) -> Option<AckMode> {
        match v {
            None | Some("auto") => Some(AckMode::Auto),
            Some("client") => Some(AckMode::Client),
            Some("client-individual") => Some(AckMode::ClientIndividual),
            _ => None,
        }
    }
}

pub(crate) enum SubKind {
    Topic(Vec<JoinHandle<()>>),
    Queue {
        queue: Arc<Queue>,
        consumer: ConsumerId,
    },
    Temp {
        name: String,
    },
}

pub(crate) struct Subscription {
    pub num: u64,
    pub dest: Dest,
    pub ack: AckMode,
    pub kind: SubKind,
}

pub(crate) struct Session {
    shared: Arc<Shared>,
    out: ConnOut,
    version: Version,
    connected: bool,
    /// Set by DISCONNECT: stop reading after this frame.
    closing: bool,
    subs: HashMap<String, Subscription>,
    sub_ids: HashMap<u64, String>,
    next_sub: u64,
    /// Temp queue NAME -> its registry id.
    temps: HashMap<String, String>,
    /// Temp queue NAME -> the `/reply-queue/<id>` a `reply-to` naming it becomes.
    reply_dests: HashMap<String, String>,
    /// Where replies to temp queues are encoded (see `deliver_temp`).
    scratch: BytesMut,
    /// The queue the last SEND to a queue went to (see `queue_named`).
    last_queue: Option<(String, Arc<Queue>)>,
    transactions: HashMap<String, Vec<Request>>,
    /// Negotiated heart-beat intervals: (expected from the client, sent by us), ms.
    heartbeat: (u64, u64),
    /// Who the peer is (after CONNECT) and what it may touch.
    access: Access,
    /// The connection's registry entry (login, client id), when served by a listener.
    info: Option<Arc<ConnectionInfo>>,
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>, out: ConnOut, access: Access) -> Session {
        Session {
            shared,
            out,
            version: Version::V1_0,
            connected: false,
            closing: false,
            subs: HashMap::new(),
            sub_ids: HashMap::new(),
            next_sub: 1,
            temps: HashMap::new(),
            reply_dests: HashMap::new(),
            scratch: BytesMut::new(),
            last_queue: None,
            transactions: HashMap::new(),
            heartbeat: (0, 0),
            access,
            info: None,
        }
    }

    /// Ties the session to its connection's registry entry.
    pub(crate) fn with_info(mut self, info: Arc<ConnectionInfo>) -> Session {
        self.info = Some(info);
        self
    }

    /// Whether CONNECT has been accepted.
    pub(crate) fn connected(&self) -> bool {
        self.connected
    }

    /// Set by DISCONNECT: stop reading after this frame.
    pub(crate) fn closing(&self) -> bool {
        self.closing
    }

    pub(crate) fn version(&self) -> Version {
        self.version
    }

    /// Negotiated heart-beat intervals: (expected from the client, sent by us), ms.
    pub(crate) fn heartbeat(&self) -> (u64, u64) {
        self.heartbeat
    }

    pub(crate) fn id(&self) -> u64 {
        self.out.id
    }

    pub(crate) fn next_message_id(&self) -> u64 {
        self.shared.next_message.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) async fn send_receipt(&self, receipt: &str) {
        let mut buf = BytesMut::with_capacity(64);
        let mut w = FrameWriter::begin(&mut buf, self.version, Command::Receipt);
        w.header("receipt-id", receipt);
        w.body(b"", false);
        self.out.send(buf.freeze()).await;
    }

    /// Sends ERROR (with `receipt-id` if the offending frame asked for a receipt).
    pub(crate) async fn send_error(&self, message: &str, detail: &str, receipt: Option<&str>) {
        let mut buf = BytesMut::with_capacity(128 + detail.len());
        let mut w = FrameWriter::begin(&mut buf, self.version, Command::Error);
        // A header value is one line.
        let message: String = message.replace(['\n', '\r'], " ");
        w.header("message", &message);
        if let Some(r) = receipt {
            w.header("receipt-id", r);
        }
        w.header("content-type", "text/plain");
        w.body(detail.as_bytes(), true);
        self.out.send(buf.freeze()).await;
    }

    /// Refuses a frame visibly: a log line with the reason, the counter
    /// `nagare_rejected_total{protocol="stomp",reason}`, and an ERROR (with `receipt-id`
    /// if the frame asked for a receipt).
    pub(crate) async fn reject(&self, error: &StompError, receipt: Option<&str>) {
        let reason = error.reason();
        tracing::warn!(conn = self.id(), reason, %error, "stomp frame rejected");
        metrics::counter!("nagare_rejected_total", "protocol" => "stomp", "reason" => reason)
            .increment(1);
        let text = error.to_string();
        self.send_error(&text, &text, receipt).await;
    }

    /// Ends everything the connection owns: queue consumers (their unacknowledged messages
    /// are redelivered), topic followers, temp queues; open transactions are dropped.
    pub(crate) fn cleanup(&mut self) {
        for (_, sub) in self.subs.drain() {
            crate::meters::subscription_ended(&sub);
            end_subscription(sub);
        }
        for (_, id) in self.temps.drain() {
            self.shared.temp.remove(&id);
        }
        self.reply_dests.clear();
        self.transactions.clear();
    }
}

pub(crate) fn end_subscription(sub: Subscription) {
    match sub.kind {
        SubKind::Topic(tasks) => tasks.iter().for_each(|t| t.abort()),
        SubKind::Queue { queue, consumer } => queue.unsubscribe(consumer),
        SubKind::Temp { .. } => {}
    }
}

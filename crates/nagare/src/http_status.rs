//! `GET /status`: one answer with what an operator looks at first (the console's
//! overview, `nagare status`): version and commit, uptime, listeners, counts, disk,
//! cumulative traffic and open connections. Rates are for the client to compute from two
//! samples: the broker keeps totals only. Needs Describe on the cluster.

use axum::extract::State;
use axum::response::Response;
use axum::{Extension, Json};
use nagare_core::security::Operation;
use serde::{Deserialize, Serialize};

use crate::http::Ops;
use crate::http_auth::Caller;

/// The version and the git commit the binary was built from (`build.rs`).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
pub(crate) const COMMIT: &str = env!("NAGARE_GIT_COMMIT");

/// One bound listener as `serve` bound it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ListenerView {
    /// `kafka`, or `kafka.1`... for `[[kafka.listeners]]` entries (the ports file's names).
    pub name: String,
    pub protocol: String,
    pub address: String,
    pub tls: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Status {
    pub version: String,
    pub commit: String,
    pub started_at_ms: i64,
    pub uptime_seconds: u64,
    pub data_dir: String,
    pub node_id: i32,
    pub cluster_id: String,
    /// Where topics live and whether that store serves now.
    #[serde(default)]
    pub store: StoreView,
    pub listeners: Vec<ListenerView>,
    pub topics: usize,
    pub partitions: usize,
    pub groups: usize,
    pub queues: usize,
    pub connections: Connections,
    pub disk: Disk,
    pub traffic: Traffic,
}

/// The store: `local` (the embedded log in `data_dir`) or `kafka` (cluster mode, at
/// `location`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct StoreView {
    pub kind: String,
    pub location: String,
    pub ready: bool,
    /// Why it is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Connections {
    pub kafka: usize,
    pub stomp: usize,
    pub forward: usize,
    pub http: usize,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Disk {
    /// Bytes of every topic's log (internal logs not included).
    pub log_bytes: u64,
    /// Of the file system holding the data directory: what an unprivileged user may
    /// still write, and its size.
    pub free_bytes: u64,
    pub total_bytes: u64,
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Traffic {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub records_in: u64,
    pub records_out: u64,
}

pub(crate) async fn status(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Status>, Response> {
    caller.may_on_cluster(&s.security.authorizer, Operation::Describe)?;
    let topics = s.broker.list_topics();
    let partitions = topics.iter().map(|t| t.partition_count()).sum();
    let log_bytes = topics
        .iter()
        .flat_map(|t| t.partitions())
        .map(|p| p.size_bytes())
        .sum();
    // statvfs reads the superblock's counters: no disk I/O worth a blocking task.
    let (free_bytes, total_bytes) = match rustix::fs::statvfs(s.broker.data_dir()) {
        Ok(v) => (
            v.f_bavail.saturating_mul(v.f_frsize),
            v.f_blocks.saturating_mul(v.f_frsize),
        ),
        Err(_) => (0, 0),
    };
    let (groups, queues) = match &s.core {
        Some(c) => (c.groups.list_groups().len(), c.queues.list().len()),
        None => (0, 0),
    };
    let now = nagare_core::log::now_ms();
    let data_dir = std::fs::canonicalize(s.broker.data_dir())
        .unwrap_or_else(|_| s.broker.data_dir().to_path_buf());
    Ok(Json(Status {
        version: VERSION.to_string(),
        commit: COMMIT.to_string(),
        started_at_ms: s.started_at_ms,
        uptime_seconds: u64::try_from((now - s.started_at_ms) / 1000).unwrap_or(0),
        data_dir: data_dir.display().to_string(),
        node_id: s.broker.node_id(),
        cluster_id: s.broker.cluster_id().to_string(),
        store: store_view(&s, &data_dir),
        listeners: s.listeners.as_ref().clone(),
        topics: topics.len(),
        partitions,
        groups,
        queues,
        connections: connections(&s),
        disk: Disk {
            log_bytes,
            free_bytes,
            total_bytes,
        },
        traffic: traffic(&s),
    }))
}

fn store_view(s: &Ops, data_dir: &std::path::Path) -> StoreView {
    let (ready, reason) = match s.broker.readiness() {
        nagare_core::store::Readiness::Ready => (true, None),
        nagare_core::store::Readiness::NotReady(why) => (false, Some(why)),
    };
    match s.broker.cluster() {
        Some(c) => StoreView {
            kind: "kafka".into(),
            location: c.location(),
            ready,
            reason,
        },
        None => StoreView {
            kind: "local".into(),
            location: data_dir.display().to_string(),
            ready,
            reason,
        },
    }
}

fn connections(s: &Ops) -> Connections {
    let open = |protocol| s.connections.open_count(protocol);
    Connections {
        kafka: open("kafka"),
        stomp: open("stomp"),
        forward: open("forward"),
        http: open("http"),
    }
}

fn traffic(s: &Ops) -> Traffic {
    let t = s.broker.traffic().totals();
    Traffic {
        bytes_in: t.bytes_in,
        bytes_out: t.bytes_out,
        records_in: t.records_in,
        records_out: t.records_out,
    }
}

//! The HTTP admin listener: `/healthz`, `/metrics` (Prometheus) and a small topic API
//! (`GET/POST /topics`, `GET/DELETE /topics/{name}`) used by `nagare topic`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use nagare_core::{Broker, CoreError, Topic};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Clone)]
struct AppState {
    broker: Arc<Broker>,
    metrics: PrometheusHandle,
}

pub(crate) fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    Ok(PrometheusBuilder::new().install_recorder()?)
}

pub(crate) async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    metrics: PrometheusHandle,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(render_metrics))
        .route("/topics", get(list_topics).post(create_topic))
        .route("/topics/:name", get(describe_topic).delete(delete_topic))
        .with_state(AppState { broker, metrics });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await?;
    Ok(())
}

async fn render_metrics(State(s): State<AppState>) -> String {
    let mut text = s.metrics.render();
    // Gauges read straight from the logs at scrape time: always exact, no bookkeeping.
    text.push_str("# TYPE nagare_partition_log_end_offset gauge\n");
    let topics = s.broker.list_topics();
    for t in &topics {
        for p in t.partitions() {
            text.push_str(&format!(
                "nagare_partition_log_end_offset{{topic=\"{}\",partition=\"{}\"}} {}\n",
                t.name(),
                p.index(),
                p.log_end_offset()
            ));
        }
    }
    text.push_str("# TYPE nagare_partition_size_bytes gauge\n");
    for t in &topics {
        for p in t.partitions() {
            text.push_str(&format!(
                "nagare_partition_size_bytes{{topic=\"{}\",partition=\"{}\"}} {}\n",
                t.name(),
                p.index(),
                p.size_bytes()
            ));
        }
    }
    text
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TopicInfo {
    pub name: String,
    pub id: String,
    pub partitions: Vec<PartitionInfo>,
    pub config: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PartitionInfo {
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct CreateTopic {
    pub name: String,
    pub partitions: Option<u32>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

fn info(t: &Topic) -> TopicInfo {
    TopicInfo {
        name: t.name().to_string(),
        id: t.id().to_string(),
        partitions: t
            .partitions()
            .iter()
            .map(|p| PartitionInfo {
                partition: p.index(),
                log_start_offset: p.log_start_offset(),
                log_end_offset: p.log_end_offset(),
                size_bytes: p.size_bytes(),
            })
            .collect(),
        config: t
            .config()
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

struct ApiError(CoreError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. } => {
                StatusCode::NOT_FOUND
            }
            CoreError::TopicExists(_) => StatusCode::CONFLICT,
            CoreError::InvalidTopicName { .. }
            | CoreError::InvalidPartitions(_)
            | CoreError::InvalidConfig { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}

async fn list_topics(State(s): State<AppState>) -> Json<Vec<TopicInfo>> {
    Json(s.broker.list_topics().iter().map(|t| info(t)).collect())
}

async fn describe_topic(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TopicInfo>, ApiError> {
    s.broker
        .topic(&name)
        .map(|t| Json(info(&t)))
        .ok_or(ApiError(CoreError::UnknownTopic(name)))
}

async fn create_topic(
    State(s): State<AppState>,
    Json(req): Json<CreateTopic>,
) -> Result<(StatusCode, Json<TopicInfo>), ApiError> {
    let mut config = s.broker.config().topic_defaults.clone();
    for (k, v) in &req.config {
        config.set(k, v).map_err(ApiError)?;
    }
    let broker = s.broker.clone();
    let topic =
        tokio::task::spawn_blocking(move || broker.create_topic(&req.name, req.partitions, config))
            .await
            .map_err(|_| ApiError(CoreError::ShuttingDown))?
            .map_err(ApiError)?;
    Ok((StatusCode::CREATED, Json(info(&topic))))
}

async fn delete_topic(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let broker = s.broker.clone();
    tokio::task::spawn_blocking(move || broker.delete_topic(&name))
        .await
        .map_err(|_| ApiError(CoreError::ShuttingDown))?
        .map_err(ApiError)?;
    Ok(StatusCode::NO_CONTENT)
}

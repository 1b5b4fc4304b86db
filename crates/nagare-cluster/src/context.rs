//! The librdkafka client context of every gateway client: its log lines go to
//! `tracing` (at debug level: a cluster that is down makes librdkafka repeat itself on
//! every reconnect; the gateway says it once, through [`Health`]), and its global
//! errors feed the gateway's health.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::health::Health;

#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) health: Arc<Health>,
    /// Which client this is, in log lines.
    pub(crate) role: &'static str,
    /// Set on a fatal error: the client is unusable and must be made anew.
    pub(crate) fatal: Arc<AtomicBool>,
}

impl Context {
    pub(crate) fn new(health: &Arc<Health>, role: &'static str) -> Context {
        Context {
            health: health.clone(),
            role,
            fatal: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical => {
                tracing::error!(target: "librdkafka", client = self.role, fac, "{message}")
            }
            _ => tracing::debug!(target: "librdkafka", client = self.role, fac, "{message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.health.not_ready(format!(
                "no broker of the Kafka cluster at {} answers ({reason})",
                self.health.location()
            ));
        }
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            self.fatal.store(true, Ordering::SeqCst);
            tracing::error!(target: "librdkafka", client = self.role, %error, reason, "fatal client error");
        } else {
            tracing::debug!(target: "librdkafka", client = self.role, %error, reason, "client error");
        }
    }
}

impl ConsumerContext for Context {}

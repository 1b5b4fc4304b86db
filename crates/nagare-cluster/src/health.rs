//! Whether the cluster answers: the last probe's result, what the gateway's clients
//! report in between (librdkafka says when every broker connection is down), and the
//! one reason the gateway must stop (a cluster without share groups). `/healthz` and
//! every append read it: while the cluster is known to be unreachable, appends fail at
//! once instead of waiting out the delivery timeout.

use nagare_core::store::Readiness;
use tokio::sync::watch;

pub(crate) struct Health {
    location: String,
    state: watch::Sender<Readiness>,
    fatal: watch::Sender<Option<String>>,
}

impl Health {
    pub(crate) fn new(location: String) -> Health {
        let (state, _) = watch::channel(Readiness::NotReady(format!(
            "the Kafka cluster at {location} has not answered yet"
        )));
        let (fatal, _) = watch::channel(None);
        Health {
            location,
            state,
            fatal,
        }
    }

    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    pub(crate) fn readiness(&self) -> Readiness {
        self.state.borrow().clone()
    }

    /// `Err` with the reason while the cluster is known to be unreachable.
    pub(crate) fn check(&self) -> Result<(), String> {
        match &*self.state.borrow() {
            Readiness::Ready => Ok(()),
            Readiness::NotReady(why) => Err(why.clone()),
        }
    }

    /// The cluster answered.
    pub(crate) fn ready(&self, brokers: usize) {
        let was = self.state.send_replace(Readiness::Ready);
        if !was.is_ready() {
            tracing::info!(
                store = %self.location,
                brokers,
                "the Kafka cluster answers: ready"
            );
        }
    }

    /// The cluster did not answer, or cannot serve the gateway yet.
    pub(crate) fn not_ready(&self, reason: String) {
        let now = Readiness::NotReady(reason.clone());
        let was = self.state.send_replace(now);
        match was {
            Readiness::Ready => tracing::warn!(
                store = %self.location,
                %reason,
                "the Kafka cluster is unavailable: clients get errors until it answers again"
            ),
            Readiness::NotReady(before) if before != reason => {
                tracing::warn!(store = %self.location, %reason, "the Kafka cluster is not ready")
            }
            Readiness::NotReady(_) => {}
        }
    }

    /// The gateway cannot work with this cluster at all: it must stop.
    pub(crate) fn fail(&self, reason: String) {
        tracing::error!(store = %self.location, %reason, "cluster mode cannot run against this cluster");
        self.state.send_replace(Readiness::NotReady(reason.clone()));
        self.fatal.send_replace(Some(reason));
    }

    /// Resolves with the reason once [`fail`](Self::fail) was called.
    pub(crate) async fn failed(&self) -> String {
        let mut rx = self.fatal.subscribe();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            // The sender lives as long as `self`.
            Err(_) => String::new(),
        };
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readiness_follows_the_probes_and_failure_is_final() {
        let h = Health::new("kafka://h:1".into());
        assert!(h.check().unwrap_err().contains("has not answered yet"));
        h.ready(3);
        assert_eq!(h.readiness(), Readiness::Ready);
        assert!(h.check().is_ok());
        h.not_ready("connection refused".into());
        assert_eq!(h.check().unwrap_err(), "connection refused");
        h.fail("no share groups".into());
        assert_eq!(h.failed().await, "no share groups");
    }
}

//! The STOMP front end's Prometheus metrics: frames received by command, MESSAGE frames
//! sent, open subscriptions by kind, temp queues. Per-command handles are looked up once
//! and kept in a static table, so a frame costs one atomic add.

use std::sync::OnceLock;

use metrics::Counter;

use crate::frame::Command;
use crate::session::{SubKind, Subscription};

/// One slot per [`Command`] variant (15 of them; a spare for safety).
const COMMANDS: usize = 16;

static RECEIVED: [OnceLock<Counter>; COMMANDS] = [const { OnceLock::new() }; COMMANDS];

/// Counts a frame the client sent (`nagare_stomp_frames_received_total{command}`).
pub(crate) fn frame_received(command: Command) {
    let slot = (command as usize).min(COMMANDS - 1);
    RECEIVED[slot]
        .get_or_init(|| {
            metrics::counter!("nagare_stomp_frames_received_total", "command" => command.as_str())
        })
        .increment(1);
}

/// Counts MESSAGE frames written to subscribers (`nagare_stomp_messages_sent_total{kind}`).
pub(crate) fn messages_sent(kind: &'static str, n: usize) {
    static TOPIC: OnceLock<Counter> = OnceLock::new();
    static QUEUE: OnceLock<Counter> = OnceLock::new();
    let slot = if kind == "topic" { &TOPIC } else { &QUEUE };
    slot.get_or_init(|| metrics::counter!("nagare_stomp_messages_sent_total", "kind" => kind))
        .increment(n as u64);
}

fn kind(sub: &Subscription) -> &'static str {
    match sub.kind {
        SubKind::Topic(_) => "topic",
        SubKind::Queue { .. } => "queue",
        SubKind::Temp { .. } => "temp",
    }
}

/// A SUBSCRIBE took effect (`nagare_stomp_subscriptions{kind}` up by one).
pub(crate) fn subscription_started(sub: &Subscription) {
    metrics::gauge!("nagare_stomp_subscriptions", "kind" => kind(sub)).increment(1.0);
    metrics::counter!("nagare_stomp_subscribes_total", "kind" => kind(sub)).increment(1);
}

/// An UNSUBSCRIBE, or the connection closed with the subscription open.
pub(crate) fn subscription_ended(sub: &Subscription) {
    metrics::gauge!("nagare_stomp_subscriptions", "kind" => kind(sub)).decrement(1.0);
}

/// A temp queue was created (`delta` 1) or removed (-1).
pub(crate) fn temp_queues(delta: f64) {
    metrics::gauge!("nagare_stomp_temp_queues").increment(delta);
}

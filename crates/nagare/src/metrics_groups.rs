//! Scrape-time gauges of consumer groups (state, members, committed offsets and lag per
//! partition) and STOMP queues (depth, unacknowledged, consumers, redeliveries), read
//! from the coordinator and the queues when Prometheus asks.

use std::fmt::Write;

use nagare_core::Subsystems;

use crate::http::Ops;
use crate::metrics_scrape::{esc, family};

/// Every state a group can be in, so a state's series drops to 0 instead of vanishing.
const GROUP_STATES: [&str; 5] = [
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
];

pub(crate) fn render(out: &mut String, ops: &Ops, core: &Subsystems) {
    groups(out, ops, core);
    queues(out, core);
}

fn groups(out: &mut String, ops: &Ops, core: &Subsystems) {
    let listed = core.groups.list_groups();
    family(
        out,
        "nagare_group_state",
        "gauge",
        "1 for the consumer group's current state, 0 for the others.",
    );
    for g in &listed {
        let current = g.state.as_str();
        for s in GROUP_STATES {
            let _ = writeln!(
                out,
                "nagare_group_state{{group=\"{}\",state=\"{s}\"}} {}",
                esc(&g.group_id),
                u8::from(s == current)
            );
        }
    }
    family(
        out,
        "nagare_group_members",
        "gauge",
        "Members of the consumer group.",
    );
    for g in &listed {
        let members = core.groups.describe_group(&g.group_id).members.len();
        let _ = writeln!(
            out,
            "nagare_group_members{{group=\"{}\"}} {members}",
            esc(&g.group_id)
        );
    }
    let mut offsets = String::new();
    let mut lags = String::new();
    for g in &listed {
        for o in core.groups.offsets_with_lag(&ops.broker, &g.group_id) {
            let labels = format!(
                "group=\"{}\",topic=\"{}\",partition=\"{}\"",
                esc(&g.group_id),
                esc(&o.topic),
                o.partition
            );
            let _ = writeln!(
                offsets,
                "nagare_group_committed_offset{{{labels}}} {}",
                o.committed_offset
            );
            if let Some(lag) = o.lag {
                let _ = writeln!(lags, "nagare_group_lag{{{labels}}} {lag}");
            }
        }
    }
    family(
        out,
        "nagare_group_committed_offset",
        "gauge",
        "Offset the consumer group committed, per topic and partition.",
    );
    out.push_str(&offsets);
    family(
        out,
        "nagare_group_lag",
        "gauge",
        "Records between the group's committed offset and the log end, per topic and partition.",
    );
    out.push_str(&lags);
}

/// A queue family: name, type, help, and how to read it from the stats.
type QueueFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&nagare_core::queues::QueueStats) -> u64,
);

fn queues(out: &mut String, core: &Subsystems) {
    let queues = core.queues.list();
    let gauges: [QueueFamily; 4] = [
        (
            "nagare_queue_depth",
            "gauge",
            "Messages in the STOMP queue waiting for a consumer.",
            |s| s.depth,
        ),
        (
            "nagare_queue_unacked",
            "gauge",
            "Messages of the STOMP queue delivered and not yet acknowledged.",
            |s| s.unacked,
        ),
        (
            "nagare_queue_consumers",
            "gauge",
            "Consumers (subscriptions) of the STOMP queue.",
            |s| s.consumers,
        ),
        (
            "nagare_queue_redeliveries_total",
            "counter",
            "Messages of the STOMP queue delivered again (after a NACK, an unsubscribe or a disconnect).",
            |s| s.redeliveries,
        ),
    ];
    for (name, kind, help, read) in gauges {
        family(out, name, kind, help);
        for q in &queues {
            let _ = writeln!(
                out,
                "{name}{{queue=\"{}\"}} {}",
                esc(&q.name),
                read(&q.stats)
            );
        }
    }
}

//! `nagare group list|describe|reset-offsets|delete`: consumer groups of a running broker
//! through the HTTP admin API. `reset-offsets` takes the options of Kafka's
//! `kafka-consumer-groups.sh --reset-offsets`, and like it only shows the new offsets
//! unless `--execute` is given.

use anyhow::Context;
use clap::{ArgGroup, Args, Subcommand};

use crate::admin_client::{path_segment, AdminClient, AdminConnection, AdminLogin};
use crate::http_groups::{
    GroupDetail, GroupSummary, NamedTarget, OffsetInfo, ResetRequest, Target,
};
use crate::output::{print_json, Output};

#[derive(Debug, Args)]
pub(crate) struct GroupArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    #[command(flatten)]
    pub login: AdminLogin,
    #[command(subcommand)]
    pub action: GroupAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GroupAction {
    /// List consumer groups with their state, members and total lag.
    List {
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Show a group's members and, per partition, committed offset, log end and lag.
    Describe {
        group: String,
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Move a group's committed offsets (the group must have no members).
    ResetOffsets(ResetArgs),
    /// Delete a group and its committed offsets (the group must have no members).
    Delete { group: String },
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(
    ["to_earliest", "to_latest", "to_offset", "to_datetime", "by_timestamp_ms", "shift_by"]
)))]
pub(crate) struct ResetArgs {
    group: String,
    /// The topic, optionally with partitions as Kafka's tool takes them: `t` or `t:0,2`.
    #[arg(long)]
    topic: String,
    /// To the first offset still in the log.
    #[arg(long)]
    to_earliest: bool,
    /// To the log end (skip everything there is).
    #[arg(long)]
    to_latest: bool,
    /// To this offset (clamped to the log's start and end).
    #[arg(long, value_name = "OFFSET")]
    to_offset: Option<i64>,
    /// To the first record at or after this time: `2026-01-31T12:00:00` (UTC),
    /// `2026-01-31T12:00:00.500`, or RFC 3339 with a zone (`...+01:00`, `...Z`).
    #[arg(long, value_name = "DATETIME")]
    to_datetime: Option<String>,
    /// To the first record at or after this unix time in milliseconds.
    #[arg(long, value_name = "MS")]
    by_timestamp_ms: Option<i64>,
    /// By this many from the committed offset (negative: back), clamped to the log.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    shift_by: Option<i64>,
    /// Only show the offsets a reset would set (the default without --execute).
    #[arg(long, conflicts_with = "execute")]
    dry_run: bool,
    /// Do the reset.
    #[arg(long)]
    execute: bool,
    #[arg(long, value_enum, default_value_t)]
    output: Output,
}

pub(crate) fn run(args: GroupArgs) -> anyhow::Result<()> {
    let client = AdminClient::login(&args.conn, &args.login)?;
    match args.action {
        GroupAction::List { output } => {
            let groups: Vec<GroupSummary> = client.get("/groups")?;
            match output {
                Output::Json => print_json(&groups)?,
                Output::Table => {
                    println!(
                        "{:<40} {:<20} {:<10} {:>8} {:>12}",
                        "GROUP", "STATE", "PROTOCOL", "MEMBERS", "LAG"
                    );
                    for g in groups {
                        println!(
                            "{:<40} {:<20} {:<10} {:>8} {:>12}",
                            g.group_id, g.state, g.protocol_type, g.members, g.lag
                        );
                    }
                }
            }
        }
        GroupAction::Describe { group, output } => {
            let g: GroupDetail = client.get(&format!("/groups/{}", path_segment(&group)))?;
            match output {
                Output::Json => print_json(&g)?,
                Output::Table => print_group(&g),
            }
        }
        GroupAction::ResetOffsets(r) => reset(&client, r)?,
        GroupAction::Delete { group } => {
            client.delete(&format!("/groups/{}", path_segment(&group)))?;
            println!("deleted group {group}");
        }
    }
    Ok(())
}

fn print_group(g: &GroupDetail) {
    println!(
        "group {}  state {}  protocol {} {}  members {}",
        g.group_id,
        g.state,
        dash(&g.protocol_type),
        g.protocol_name,
        g.members.len()
    );
    println!();
    println!(
        "{:<30} {:>9} {:>14} {:>14} {:>10}  {:<40} {:<16} CLIENT-ID",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"
    );
    let owner = |topic: &str, partition: i32| {
        g.members.iter().find(|m| {
            m.assignment
                .iter()
                .any(|a| a.topic == topic && a.partitions.contains(&partition))
        })
    };
    let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for o in &g.offsets {
        let m = owner(&o.topic, o.partition);
        println!(
            "{:<30} {:>9} {:>14} {:>14} {:>10}  {:<40} {:<16} {}",
            o.topic,
            o.partition,
            o.committed_offset,
            opt(o.log_end_offset),
            opt(o.lag),
            m.map_or("-", |m| m.member_id.as_str()),
            m.map_or("-", |m| m.client_host.as_str()),
            m.map_or("-", |m| m.client_id.as_str()),
        );
    }
    // Assigned partitions nothing was committed for yet, as Kafka's tool shows them.
    for m in &g.members {
        for a in &m.assignment {
            for &p in &a.partitions {
                if g.offsets
                    .iter()
                    .any(|o| o.topic == a.topic && o.partition == p)
                {
                    continue;
                }
                println!(
                    "{:<30} {:>9} {:>14} {:>14} {:>10}  {:<40} {:<16} {}",
                    a.topic, p, "-", "-", "-", m.member_id, m.client_host, m.client_id
                );
            }
        }
    }
    if !g.members.is_empty() {
        println!();
        println!(
            "{:<40} {:<16} {:<20} ASSIGNMENT",
            "CONSUMER-ID", "HOST", "CLIENT-ID"
        );
        for m in &g.members {
            let assignment: Vec<String> = m
                .assignment
                .iter()
                .map(|a| {
                    let ps: Vec<String> = a.partitions.iter().map(i32::to_string).collect();
                    format!("{}:{}", a.topic, ps.join(","))
                })
                .collect();
            println!(
                "{:<40} {:<16} {:<20} {}",
                m.member_id,
                m.client_host,
                m.client_id,
                assignment.join(" ")
            );
        }
    }
}

fn dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

fn reset(client: &AdminClient, r: ResetArgs) -> anyhow::Result<()> {
    let (topic, partitions) = match r.topic.split_once(':') {
        Some((t, ps)) => {
            let ps = ps
                .split(',')
                .map(|p| p.trim().parse::<i32>())
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("partitions in --topic {:?}", r.topic))?;
            (t.to_string(), Some(ps))
        }
        None => (r.topic.clone(), None),
    };
    let to = if r.to_earliest {
        Target::Named(NamedTarget::Earliest)
    } else if r.to_latest {
        Target::Named(NamedTarget::Latest)
    } else if let Some(offset) = r.to_offset {
        Target::Offset { offset }
    } else if let Some(shift_by) = r.shift_by {
        Target::ShiftBy { shift_by }
    } else if let Some(ms) = r.by_timestamp_ms {
        Target::Timestamp { timestamp_ms: ms }
    } else if let Some(dt) = &r.to_datetime {
        Target::Timestamp {
            timestamp_ms: parse_datetime(dt)?,
        }
    } else {
        anyhow::bail!(
            "say where to: --to-earliest, --to-latest, --to-offset, --to-datetime, \
             --by-timestamp-ms or --shift-by"
        );
    };
    let dry_run = !r.execute;
    let body = ResetRequest {
        topic,
        to,
        partitions,
        dry_run,
    };
    let offsets: Vec<OffsetInfo> = client.post(
        &format!("/groups/{}/offsets", path_segment(&r.group)),
        &body,
    )?;
    match r.output {
        Output::Json => print_json(&offsets)?,
        Output::Table => {
            println!(
                "{:<40} {:<30} {:>9} {:>18}",
                "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"
            );
            for o in &offsets {
                println!(
                    "{:<40} {:<30} {:>9} {:>18}",
                    r.group, o.topic, o.partition, o.committed_offset
                );
            }
        }
    }
    if dry_run && !r.dry_run {
        eprintln!("(dry run: nothing changed; add --execute to reset the offsets)");
    }
    Ok(())
}

/// Kafka's `--to-datetime` forms: `YYYY-MM-DDTHH:mm:SS[.sss]` (UTC here; Kafka takes the
/// local zone, which a service rarely has set) or RFC 3339 with a zone.
fn parse_datetime(s: &str) -> anyhow::Result<i64> {
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    let at = match time::OffsetDateTime::parse(s, &Rfc3339) {
        Ok(t) => t,
        Err(_) => {
            let with_ms =
                format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]");
            let plain = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
            time::PrimitiveDateTime::parse(s, with_ms)
                .or_else(|_| time::PrimitiveDateTime::parse(s, plain))
                .with_context(|| {
                    format!("--to-datetime {s:?}: expected YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm]")
                })?
                .assume_utc()
        }
    };
    Ok((at.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn datetimes_in_kafka_forms() {
        assert_eq!(
            super::parse_datetime("2026-01-01T00:00:00").unwrap(),
            1_767_225_600_000
        );
        assert_eq!(
            super::parse_datetime("2026-01-01T00:00:00.250").unwrap(),
            1_767_225_600_250
        );
        assert_eq!(
            super::parse_datetime("2026-01-01T01:00:00+01:00").unwrap(),
            1_767_225_600_000
        );
        assert!(super::parse_datetime("yesterday").is_err());
    }
}

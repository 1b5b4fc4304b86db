//! Server-side assignors of the consumer group protocol (KIP-848): `uniform` (Kafka's
//! default: balanced and sticky) and `range` (contiguous ranges per topic). Both take the
//! members' resolved subscriptions and the subscribed topics' partition counts and return
//! the target assignment of every member.

use std::collections::{BTreeMap, BTreeSet};

use super::GroupError;

/// Partitions by topic name.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The assignor used when no member names one (Kafka's `group.consumer.assignors` head).
pub const DEFAULT_ASSIGNOR: &str = "uniform";

/// What an assignor works from.
pub(crate) struct AssignmentSpec<'a> {
    /// member id -> the topics it subscribes to (regexes already resolved).
    pub members: &'a BTreeMap<String, BTreeSet<String>>,
    /// topic -> partition count, for every subscribed topic that exists.
    pub partitions: &'a BTreeMap<String, i32>,
    /// The previous target assignment, kept where it is still valid (stickiness).
    pub previous: &'a BTreeMap<String, Assignment>,
}

/// Whether `name` is an assignor this broker has.
pub(crate) fn is_supported(name: &str) -> bool {
    matches!(name, "uniform" | "range")
}

/// Runs the assignor `name`.
pub(crate) fn assign(
    name: &str,
    spec: &AssignmentSpec<'_>,
) -> Result<BTreeMap<String, Assignment>, GroupError> {
    match name {
        "uniform" => Ok(uniform(spec)),
        "range" => Ok(range(spec)),
        other => Err(GroupError::UnsupportedAssignor(other.to_string())),
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Balanced and sticky: every partition of a subscribed topic goes to one subscriber;
/// what a member had in the previous target stays with it unless the balance (loads
/// differing by at most one among members that could swap) needs it elsewhere.
fn uniform(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let subscribed = |member: &str, topic: &str| {
        spec.members
            .get(member)
            .is_some_and(|topics| topics.contains(topic))
    };
    // 1. Keep what is still valid from the previous target.
    let mut taken: BTreeSet<(String, i32)> = BTreeSet::new();
    for (member, assignment) in spec.previous {
        if !spec.members.contains_key(member) {
            continue;
        }
        for (topic, parts) in assignment {
            let Some(&n) = spec.partitions.get(topic) else {
                continue;
            };
            if !subscribed(member, topic) {
                continue;
            }
            for &p in parts {
                if p < n && taken.insert((topic.clone(), p)) {
                    out.entry(member.clone())
                        .or_default()
                        .entry(topic.clone())
                        .or_default()
                        .insert(p);
                }
            }
        }
    }
    // 2. Hand out the rest, each to the least loaded subscriber.
    for (topic, &n) in spec.partitions {
        for p in 0..n {
            if taken.contains(&(topic.clone(), p)) {
                continue;
            }
            let least = out
                .iter()
                .filter(|(m, _)| subscribed(m, topic))
                .min_by_key(|(m, a)| (count(a), (*m).clone()))
                .map(|(m, _)| m.clone());
            if let Some(m) = least {
                out.entry(m)
                    .or_default()
                    .entry(topic.clone())
                    .or_default()
                    .insert(p);
                taken.insert((topic.clone(), p));
            }
        }
    }
    // 3. Balance: move a partition from a member to a subscriber with at least two
    // fewer, until no such move exists. Each move lowers the sum of squared loads, so
    // this ends; the bound is a safety net.
    let total: usize = spec.partitions.values().map(|&n| n.max(0) as usize).sum();
    for _ in 0..=total {
        let Some(mv) = find_move(&out, &subscribed) else {
            break;
        };
        let (from, to, topic, p) = mv;
        if let Some(parts) = out.get_mut(&from).and_then(|a| a.get_mut(&topic)) {
            parts.remove(&p);
            if parts.is_empty() {
                if let Some(a) = out.get_mut(&from) {
                    a.remove(&topic);
                }
            }
        }
        out.entry(to)
            .or_default()
            .entry(topic)
            .or_default()
            .insert(p);
    }
    out
}

/// One partition move that improves the balance: (from, to, topic, partition).
fn find_move(
    out: &BTreeMap<String, Assignment>,
    subscribed: &impl Fn(&str, &str) -> bool,
) -> Option<(String, String, String, i32)> {
    let mut by_load: Vec<(&String, usize)> = out.iter().map(|(m, a)| (m, count(a))).collect();
    by_load.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (from, load) in &by_load {
        let Some(assignment) = out.get(*from) else {
            continue;
        };
        // Highest partitions move first: the low ones stay where they are.
        for (topic, parts) in assignment.iter().rev() {
            for &p in parts.iter().rev() {
                let target = by_load
                    .iter()
                    .filter(|(m, l)| *m != *from && l + 1 < *load && subscribed(m, topic))
                    .min_by_key(|(m, l)| (*l, (*m).clone()));
                if let Some((to, _)) = target {
                    return Some(((*from).clone(), (*to).clone(), topic.clone(), p));
                }
            }
        }
    }
    None
}

/// Per topic, its subscribers sorted by member id get contiguous ranges, the first
/// `partitions % members` one partition more (Kafka's range assignor).
fn range(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &n) in spec.partitions {
        let subscribers: Vec<&String> = spec
            .members
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() || n <= 0 {
            continue;
        }
        let per = n as usize / subscribers.len();
        let extra = n as usize % subscribers.len();
        let mut next = 0usize;
        for (i, m) in subscribers.iter().enumerate() {
            let len = per + usize::from(i < extra);
            if len == 0 {
                continue;
            }
            let parts: BTreeSet<i32> = (next..next + len).map(|p| p as i32).collect();
            next += len;
            out.entry((*m).clone())
                .or_default()
                .insert(topic.clone(), parts);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        list.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn loads(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values().map(count).collect()
    }

    #[test]
    fn uniform_balances_and_covers_every_partition() {
        let m = members(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["t"])]);
        let parts = BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 3)]);
        let out = uniform(&AssignmentSpec {
            members: &m,
            partitions: &parts,
            previous: &BTreeMap::new(),
        });
        let mut all = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(all.insert((t.clone(), *p)), "assigned twice");
                }
            }
        }
        assert_eq!(all.len(), 8);
        let l = loads(&out);
        assert!(
            l.iter().max().unwrap() - l.iter().min().unwrap() <= 1,
            "{l:?}"
        );
        assert!(out["c"].keys().all(|t| t == "t"));
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let parts = BTreeMap::from([("t".to_string(), 4)]);
        let one = members(&[("a", &["t"])]);
        let first = uniform(&AssignmentSpec {
            members: &one,
            partitions: &parts,
            previous: &BTreeMap::new(),
        });
        assert_eq!(count(&first["a"]), 4);
        let two = members(&[("a", &["t"]), ("b", &["t"])]);
        let second = uniform(&AssignmentSpec {
            members: &two,
            partitions: &parts,
            previous: &first,
        });
        assert_eq!(loads(&second), vec![2, 2]);
        // a keeps the low half; b takes the rest.
        assert_eq!(second["a"]["t"], BTreeSet::from([0, 1]));
        assert_eq!(second["b"]["t"], BTreeSet::from([2, 3]));
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let m = members(&[("a", &["t"]), ("b", &["t"])]);
        let parts = BTreeMap::from([("t".to_string(), 5)]);
        let out = assign(
            "range",
            &AssignmentSpec {
                members: &m,
                partitions: &parts,
                previous: &BTreeMap::new(),
            },
        )
        .unwrap();
        assert_eq!(out["a"]["t"], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"]["t"], BTreeSet::from([3, 4]));
        assert!(assign(
            "sticky",
            &AssignmentSpec {
                members: &m,
                partitions: &parts,
                previous: &BTreeMap::new()
            }
        )
        .is_err());
    }
}

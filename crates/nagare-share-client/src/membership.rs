//! Membership of the share group: ShareGroupHeartbeat to the group's coordinator at the
//! interval it answers, the member epoch (0 to join, the coordinator's afterwards, -1 to
//! leave), and the assignment it hands out: the partitions this member fetches from.
//! UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH rejoin at epoch 0 with the same member id;
//! NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and a lost
//! connection look for the coordinator again.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;

use crate::cluster::Cluster;
use crate::error::code;
use crate::ShareError;

/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;
/// Heartbeats never come faster than this, whatever the coordinator says.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// The heartbeat interval while nothing is assigned. Kafka assigns a partition only once
/// its share state is initialized, on a heartbeat after the join: at the coordinator's
/// interval (5 s by default) a new member would idle that long before its first record.
const UNASSIGNED_INTERVAL: Duration = Duration::from_millis(500);

/// How the membership is doing, as `poll` reports it.
#[derive(Debug, Clone, Default)]
pub(crate) enum Health {
    #[default]
    Ok,
    /// Failing for a reason that usually passes (coordinator moving, cluster away).
    Retrying(ShareError),
    /// Refused for a reason retrying will not fix by itself (authorization, versions).
    Failed(ShareError),
}

/// What the rest of the client sees of the membership.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    pub epoch: i32,
    /// (topic id, partition) assigned to this member, sorted.
    pub assigned: Arc<Vec<(Uuid, i32)>>,
    pub health: Health,
}

/// What to do after a heartbeat.
#[derive(Debug)]
pub(crate) enum Next {
    /// Beat again after this long; a new assignment when `Some`.
    Beat(Duration, Option<Vec<(Uuid, i32)>>),
    /// Fenced or forgotten: rejoin at epoch 0 at once, holding nothing meanwhile.
    Rejoin(ShareError),
    /// The coordinator moved, is not ready or cannot be reached: find it again.
    Rediscover(ShareError),
    /// Refused for good (until someone changes something): retry slowly.
    Failed(ShareError),
}

/// The heartbeat's state, without I/O.
#[derive(Debug, Default)]
pub(crate) struct MemberState {
    pub epoch: i32,
    pub coordinator: Option<i32>,
}

impl MemberState {
    /// Applies a heartbeat answer.
    pub(crate) fn answer(&mut self, resp: &ShareGroupHeartbeatResponse) -> Next {
        let err = || ShareError::kafka(resp.error_code, resp.error_message.as_ref());
        match resp.error_code {
            code::NONE => {
                self.epoch = resp.member_epoch;
                let interval = Duration::from_millis(resp.heartbeat_interval_ms.max(0) as u64)
                    .max(MIN_INTERVAL);
                let assignment = resp.assignment.as_ref().map(|a| {
                    let mut parts: Vec<(Uuid, i32)> = a
                        .topic_partitions
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
                        .collect();
                    parts.sort_unstable();
                    parts.dedup();
                    parts
                });
                Next::Beat(interval, assignment)
            }
            code::UNKNOWN_MEMBER_ID | code::FENCED_MEMBER_EPOCH => {
                self.epoch = 0;
                Next::Rejoin(err())
            }
            code::NOT_COORDINATOR
            | code::COORDINATOR_NOT_AVAILABLE
            | code::COORDINATOR_LOAD_IN_PROGRESS => {
                self.coordinator = None;
                Next::Rediscover(err())
            }
            _ if err().is_retriable() => {
                self.coordinator = None;
                Next::Rediscover(err())
            }
            _ => Next::Failed(err()),
        }
    }
}

/// Whether an error of finding or reaching the coordinator may pass by itself.
fn on_error(e: ShareError) -> Next {
    if e.is_retriable() {
        Next::Rediscover(e)
    } else {
        Next::Failed(e)
    }
}

pub(crate) struct Membership {
    cluster: Arc<Cluster>,
    group: String,
    member_id: String,
    topics: Vec<Arc<str>>,
    state: tokio::sync::Mutex<MemberState>,
    view: watch::Sender<View>,
}

impl Membership {
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        group: &str,
        member_id: &str,
        topics: Vec<Arc<str>>,
    ) -> Arc<Membership> {
        Arc::new(Membership {
            cluster,
            group: group.to_string(),
            member_id: member_id.to_string(),
            topics,
            state: tokio::sync::Mutex::new(MemberState::default()),
            view: watch::Sender::new(View::default()),
        })
    }

    pub(crate) fn topics(&self) -> &[Arc<str>] {
        &self.topics
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<View> {
        self.view.subscribe()
    }

    pub(crate) fn view(&self) -> View {
        self.view.borrow().clone()
    }

    fn request(&self, epoch: i32) -> ShareGroupHeartbeatRequest {
        ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(epoch)
            .with_rack_id(
                self.cluster
                    .settings()
                    .rack
                    .clone()
                    .map(StrBytes::from_string),
            )
            .with_subscribed_topic_names((epoch != LEAVE_EPOCH).then(|| {
                self.topics
                    .iter()
                    .map(|t| TopicName(StrBytes::from_string(t.to_string())))
                    .collect()
            }))
    }

    /// One heartbeat (finding the coordinator first if need be), its outcome published.
    pub(crate) async fn beat(&self) -> Next {
        let mut st = self.state.lock().await;
        let next = self.exchange(&mut st).await;
        let epoch = st.epoch;
        // Watchers (polls waiting for an assignment) wake only for a real change.
        self.view.send_if_modified(|v| {
            let before = (
                v.epoch,
                v.assigned.clone(),
                std::mem::discriminant(&v.health),
            );
            match &next {
                Next::Beat(_, assignment) => {
                    v.epoch = epoch;
                    v.health = Health::Ok;
                    if let Some(a) = assignment {
                        v.assigned = Arc::new(a.clone());
                    }
                }
                Next::Rejoin(e) => {
                    v.epoch = 0;
                    v.assigned = Arc::default();
                    v.health = Health::Retrying(e.clone());
                }
                Next::Rediscover(e) => v.health = Health::Retrying(e.clone()),
                Next::Failed(e) => v.health = Health::Failed(e.clone()),
            }
            before
                != (
                    v.epoch,
                    v.assigned.clone(),
                    std::mem::discriminant(&v.health),
                )
        });
        match &next {
            Next::Beat(_, Some(a)) => {
                tracing::debug!(group = %self.group, epoch, partitions = a.len(), "share group assignment")
            }
            Next::Beat(..) => {}
            Next::Rejoin(e) => {
                tracing::info!(group = %self.group, error = %e, "rejoining the share group")
            }
            Next::Rediscover(e) => {
                tracing::debug!(group = %self.group, error = %e, "share group coordinator unavailable")
            }
            Next::Failed(e) => {
                tracing::warn!(group = %self.group, error = %e, "share group heartbeat refused")
            }
        }
        next
    }

    async fn exchange(&self, st: &mut MemberState) -> Next {
        let coordinator = match st.coordinator {
            Some(c) => c,
            None => match self.cluster.find_coordinator(&self.group).await {
                Ok(c) => *st.coordinator.insert(c),
                Err(e) => return on_error(e),
            },
        };
        let conn = match self.cluster.node(coordinator).await {
            Ok(c) => c,
            Err(e) => {
                st.coordinator = None;
                return on_error(e);
            }
        };
        let Some(v) = conn.version(ApiKey::ShareGroupHeartbeat, 1..=1) else {
            return Next::Failed(ShareError::Unsupported(format!(
                "the coordinator {} has no ShareGroupHeartbeat v1",
                conn.addr()
            )));
        };
        match conn
            .request(&self.request(st.epoch), v, Duration::ZERO)
            .await
        {
            Ok(resp) => st.answer(&resp),
            Err(e) => {
                st.coordinator = None;
                on_error(e)
            }
        }
    }

    /// The wait before the next heartbeat, the coordinator having said `interval`.
    pub(crate) fn after_beat(&self, interval: Duration) -> Duration {
        if self.view.borrow().assigned.is_empty() {
            interval.min(UNASSIGNED_INTERVAL)
        } else {
            interval
        }
    }

    /// Heartbeats until `stop` says so: at the coordinator's interval, at once to rejoin,
    /// with a growing pause while the coordinator is away, slowly while refused.
    pub(crate) async fn run(self: Arc<Self>, first: Duration, mut stop: watch::Receiver<bool>) {
        let settings = self.cluster.settings();
        let mut wait = first;
        let mut failures = 0u32;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
            let next = tokio::select! {
                next = self.beat() => next,
                _ = stop.changed() => return,
            };
            wait = match next {
                Next::Beat(interval, _) => {
                    failures = 0;
                    self.after_beat(interval)
                }
                // At once, unless rejoining is what just failed.
                Next::Rejoin(_) => {
                    failures = failures.saturating_add(1);
                    match failures {
                        1 => Duration::ZERO,
                        n => settings.backoff_for(n - 2),
                    }
                }
                Next::Rediscover(_) => {
                    failures = failures.saturating_add(1);
                    settings.backoff_for(failures - 1)
                }
                Next::Failed(_) => settings.backoff_max,
            };
        }
    }

    /// Leaves the group (epoch -1), best effort: the coordinator otherwise forgets the
    /// member when its session times out.
    pub(crate) async fn leave(&self) {
        let mut st = self.state.lock().await;
        if st.epoch <= 0 {
            return;
        }
        let left = async {
            let coordinator = match st.coordinator {
                Some(c) => c,
                None => self.cluster.find_coordinator(&self.group).await?,
            };
            let conn = self.cluster.node(coordinator).await?;
            let v = conn.require(ApiKey::ShareGroupHeartbeat, 1..=1)?;
            let resp = conn
                .request(&self.request(LEAVE_EPOCH), v, Duration::ZERO)
                .await?;
            match resp.error_code {
                code::NONE => Ok(()),
                c => Err(ShareError::kafka(c, resp.error_message.as_ref())),
            }
        };
        match left.await {
            Ok(()) => {
                tracing::debug!(group = %self.group, member = %self.member_id, "left the share group")
            }
            Err(e) => {
                tracing::info!(group = %self.group, error = %e, "leaving the share group failed; the coordinator will time the member out")
            }
        }
        st.epoch = 0;
        self.view.send_modify(|v| {
            v.epoch = 0;
            v.assigned = Arc::default();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};

    fn ok(epoch: i32, assignment: Option<Vec<(u128, Vec<i32>)>>) -> ShareGroupHeartbeatResponse {
        ShareGroupHeartbeatResponse::default()
            .with_member_epoch(epoch)
            .with_heartbeat_interval_ms(5000)
            .with_assignment(assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(Uuid::from_u128(id))
                                .with_partitions(ps)
                        })
                        .collect(),
                )
            }))
    }

    fn error(code: i16) -> ShareGroupHeartbeatResponse {
        ShareGroupHeartbeatResponse::default().with_error_code(code)
    }

    #[test]
    fn the_epoch_and_assignment_follow_the_coordinator() {
        let mut st = MemberState {
            epoch: 0,
            coordinator: Some(1),
        };
        let Next::Beat(interval, Some(a)) =
            st.answer(&ok(3, Some(vec![(2, vec![1, 0]), (1, vec![0])])))
        else {
            panic!("expected an assignment");
        };
        assert_eq!(interval, Duration::from_secs(5));
        assert_eq!(
            a,
            [
                (Uuid::from_u128(1), 0),
                (Uuid::from_u128(2), 0),
                (Uuid::from_u128(2), 1)
            ]
        );
        assert_eq!(st.epoch, 3);
        assert!(matches!(st.answer(&ok(4, None)), Next::Beat(_, None)));
        assert_eq!(st.epoch, 4);
    }

    #[test]
    fn fenced_or_unknown_members_rejoin_at_zero() {
        for c in [code::FENCED_MEMBER_EPOCH, code::UNKNOWN_MEMBER_ID] {
            let mut st = MemberState {
                epoch: 7,
                coordinator: Some(1),
            };
            assert!(matches!(st.answer(&error(c)), Next::Rejoin(_)));
            assert_eq!(st.epoch, 0);
            assert_eq!(st.coordinator, Some(1));
        }
    }

    #[test]
    fn coordinator_errors_rediscover_and_others_fail() {
        for c in [
            code::NOT_COORDINATOR,
            code::COORDINATOR_NOT_AVAILABLE,
            code::COORDINATOR_LOAD_IN_PROGRESS,
        ] {
            let mut st = MemberState {
                epoch: 2,
                coordinator: Some(1),
            };
            assert!(matches!(st.answer(&error(c)), Next::Rediscover(_)));
            assert_eq!((st.epoch, st.coordinator), (2, None));
        }
        let mut st = MemberState::default();
        let Next::Failed(e) = st.answer(&error(30)) else {
            panic!("authorization is not retried at once");
        };
        assert_eq!(e.kafka_code(), Some(30));
        assert!(matches!(
            on_error(ShareError::Unreachable("x".into())),
            Next::Rediscover(_)
        ));
        assert!(matches!(
            on_error(ShareError::Protocol("x".into())),
            Next::Failed(_)
        ));
    }

    #[test]
    fn the_interval_has_a_floor() {
        let mut st = MemberState::default();
        let Next::Beat(interval, _) = st.answer(&ok(1, None).with_heartbeat_interval_ms(0)) else {
            panic!()
        };
        assert_eq!(interval, MIN_INTERVAL);
    }
}

//! Every core subsystem beside the topics, opened once by whoever runs the broker and
//! handed to the front ends that use it. Opening them in one place means their replay
//! runs where the caller chose (the blocking pool at startup) and their lifetime is the
//! broker's, not that of whichever listener happens to be on.

use std::sync::Arc;

use crate::groups::{CoordinatorBackground, GroupConfig, GroupCoordinator};
use crate::internal_log::InternalLogWriter;
use crate::producers::{Allocation, Producers};
use crate::queues::{Queues, QueuesBackground};
use crate::security::acl::AclOp;
use crate::security::{
    Authorizer, LoginThrottle, Security, SecurityConfig, UserStore, UserStoreWriters,
};
use crate::share_groups::{ShareGroups, ShareGroupsBackground};
use crate::transactions::{TransactionConfig, TransactionCoordinator, TransactionsBackground};
use crate::{Broker, CoreError};

/// The subsystems a front end may need; cheap to clone.
#[derive(Clone)]
pub struct Subsystems {
    /// Producer ids, epochs and sequences (Kafka idempotent producers).
    pub producers: Arc<Producers>,
    /// Consumer groups and committed offsets.
    pub groups: Arc<GroupCoordinator>,
    /// Persistent queues with competing consumers (STOMP `/queue/`).
    pub queues: Arc<Queues>,
    /// Kafka share groups (KIP-932), on the queues.
    pub share_groups: Arc<ShareGroups>,
    /// Users, ACLs and the failed-login throttle of every front end.
    pub security: Security,
    /// Kafka transactions: transactional ids, their epochs and open transactions.
    pub transactions: Arc<TransactionCoordinator>,
}

/// The background work of every subsystem: their internal-log writers, the group
/// timer, the queues' poll and trimming. Nothing is stored until it runs.
#[must_use = "nothing is stored until the subsystems' background tasks run"]
pub struct SubsystemTasks {
    producers: InternalLogWriter<Allocation>,
    groups: CoordinatorBackground,
    queues: QueuesBackground,
    share_groups: ShareGroupsBackground,
    users: UserStoreWriters,
    acls: InternalLogWriter<AclOp>,
    transactions: TransactionsBackground,
}

impl Subsystems {
    /// Replays every subsystem's internal log. Blocking: call it on the blocking pool.
    /// The transaction coordinator gets Kafka's default settings.
    pub fn open(
        broker: &Arc<Broker>,
        groups: GroupConfig,
        security: SecurityConfig,
    ) -> Result<(Subsystems, SubsystemTasks), CoreError> {
        Self::open_with(broker, groups, security, TransactionConfig::default())
    }

    /// [`Subsystems::open`] with the transaction coordinator's settings.
    pub fn open_with(
        broker: &Arc<Broker>,
        groups: GroupConfig,
        security: SecurityConfig,
        transactions: TransactionConfig,
    ) -> Result<(Subsystems, SubsystemTasks), CoreError> {
        let (producers, producers_writer) = Producers::open(broker)?;
        let (groups, groups_background) = GroupCoordinator::open(broker, groups)?;
        let (queues, queues_background) = Queues::open(broker.clone())?;
        let (share_groups, share_groups_background) = ShareGroups::open(broker, queues.clone())?;
        let (users, users_writers) = UserStore::open(broker)?;
        let (authorizer, acls_writer) = Authorizer::open(
            broker,
            security.super_users.clone(),
            security.allow_if_no_acl(),
        )?;
        let producers = Arc::new(producers);
        let (transactions, transactions_background) =
            TransactionCoordinator::open(broker, producers.clone(), groups.clone(), transactions)?;
        let subsystems = Subsystems {
            producers,
            groups,
            queues,
            share_groups,
            security: Security {
                users: Arc::new(users),
                authorizer: Arc::new(authorizer),
                throttle: Arc::new(LoginThrottle::default()),
                config: Arc::new(security),
            },
            transactions,
        };
        let tasks = SubsystemTasks {
            producers: producers_writer,
            groups: groups_background,
            queues: queues_background,
            share_groups: share_groups_background,
            users: users_writers,
            acls: acls_writer,
            transactions: transactions_background,
        };
        Ok((subsystems, tasks))
    }
}

impl SubsystemTasks {
    /// Starts every background task on the current runtime. Each ends by itself once
    /// its subsystem is dropped.
    pub fn spawn(self) {
        drop(tokio::spawn(self.producers.run()));
        drop(tokio::spawn(self.groups.run()));
        drop(tokio::spawn(self.queues.run()));
        drop(tokio::spawn(self.share_groups.run()));
        drop(tokio::spawn(self.users.run()));
        drop(tokio::spawn(self.acls.run()));
        drop(tokio::spawn(self.transactions.run()));
    }
}

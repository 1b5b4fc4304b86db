//! Temp queues (RPC over MQ): in memory only, owned by one connection, addressed by
//! others through the `/reply-queue/<id>` their `reply-to` was rewritten to.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::message::MessageHead;
use crate::writer::ConnOut;

/// One temp queue: the owner's writer and how its messages are labelled (the
/// subscription changes when the owner SUBSCRIBEs to it explicitly).
pub(crate) struct TempTarget {
    pub out: ConnOut,
    pub head: RwLock<MessageHead>,
}

#[derive(Default)]
pub(crate) struct TempQueues {
    map: RwLock<HashMap<String, Arc<TempTarget>>>,
}

impl TempQueues {
    pub fn insert(&self, id: String, target: Arc<TempTarget>) {
        self.map.write().insert(id, target);
    }

    pub fn get(&self, id: &str) -> Option<Arc<TempTarget>> {
        self.map.read().get(id).cloned()
    }

    pub fn remove(&self, id: &str) {
        self.map.write().remove(id);
    }
}

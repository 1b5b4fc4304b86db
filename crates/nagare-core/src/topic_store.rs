//! The persisted topic registry: `DATA/.nagare/topics.json`, rewritten atomically
//! (temp file + fsync + rename) on every change, so topics come back after a restart with
//! their UUIDs, partition counts and settings.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{CoreError, TopicConfig};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredTopic {
    pub id: Uuid,
    pub partitions: u32,
    pub config: TopicConfig,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct StoredState {
    pub cluster_id: String,
    pub topics: BTreeMap<String, StoredTopic>,
}

pub(crate) struct TopicStore {
    path: PathBuf,
}

impl TopicStore {
    pub(crate) fn new(data_dir: &Path) -> Result<TopicStore, CoreError> {
        let dir = data_dir.join(".nagare");
        std::fs::create_dir_all(&dir).map_err(|e| CoreError::io(&dir, e))?;
        Ok(TopicStore {
            path: dir.join("topics.json"),
        })
    }

    pub(crate) fn load(&self) -> Result<StoredState, CoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                CoreError::io(
                    &self.path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoredState::default()),
            Err(e) => Err(CoreError::io(&self.path, e)),
        }
    }

    pub(crate) fn save(&self, state: &StoredState) -> Result<(), CoreError> {
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(state).expect("topic state serializes");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| CoreError::io(&self.path, e))
    }
}

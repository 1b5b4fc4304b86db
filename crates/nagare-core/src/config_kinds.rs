//! The enumerated values of topic configs (`cleanup.policy`, `compression.type`,
//! `message.timestamp.type`), each parsed from and printed as Kafka spells it so a stored
//! topic registry and a TOML file keep Kafka's words.

/// Serializes each type as its `Display` string and deserializes it with its `FromStr`
/// (the parse error becomes the serde error), so TOML, JSON and the topic registry all
/// hold the Kafka spelling.
macro_rules! serde_as_string {
    ($($t:ty),+ $(,)?) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    )+};
}
pub(crate) use serde_as_string;

serde_as_string!(CleanupPolicy, CompressionType, TimestampType);

/// `cleanup.policy`: a list of `delete` and/or `compact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CleanupPolicy {
    compact: bool,
    delete: bool,
}

impl CleanupPolicy {
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        compact: false,
        delete: true,
    };
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        compact: true,
        delete: false,
    };
    pub const COMPACT_DELETE: CleanupPolicy = CleanupPolicy {
        compact: true,
        delete: true,
    };

    /// The latest record per key is kept (the cleaner runs on this topic).
    pub fn compact(&self) -> bool {
        self.compact
    }

    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    pub fn delete(&self) -> bool {
        self.delete
    }
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy::DELETE
    }
}

impl std::str::FromStr for CleanupPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut policy = CleanupPolicy {
            compact: false,
            delete: false,
        };
        for word in s.split(',').map(str::trim) {
            match word.to_ascii_lowercase().as_str() {
                "compact" => policy.compact = true,
                "delete" => policy.delete = true,
                other => {
                    return Err(format!(
                        "invalid cleanup.policy {other:?} (expected delete, compact or both)"
                    ))
                }
            }
        }
        Ok(policy)
    }
}

impl std::fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        })
    }
}

/// `compression.type`: the codec batches are stored with; `producer` keeps the producer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    /// The codec id of a record batch's attributes (bits 0-2), `None` for `producer`.
    pub fn codec_id(&self) -> Option<u8> {
        match self {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(0),
            CompressionType::Gzip => Some(1),
            CompressionType::Snappy => Some(2),
            CompressionType::Lz4 => Some(3),
            CompressionType::Zstd => Some(4),
        }
    }
}

impl std::str::FromStr for CompressionType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "producer" => CompressionType::Producer,
            "uncompressed" | "none" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            other => {
                return Err(format!(
                    "invalid compression.type {other:?} (expected uncompressed, zstd, lz4, \
                     snappy, gzip or producer)"
                ))
            }
        })
    }
}

impl std::fmt::Display for CompressionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompressionType::Producer => "producer",
            CompressionType::Uncompressed => "uncompressed",
            CompressionType::Gzip => "gzip",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        })
    }
}

/// `message.timestamp.type`: whose clock the stored timestamps are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// The producer's timestamps are kept.
    #[default]
    CreateTime,
    /// The broker stamps each batch with its append time.
    LogAppendTime,
}

impl std::str::FromStr for TimestampType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "CreateTime" => Ok(TimestampType::CreateTime),
            "LogAppendTime" => Ok(TimestampType::LogAppendTime),
            other => Err(format!(
                "invalid message.timestamp.type {other:?} (expected CreateTime or LogAppendTime)"
            )),
        }
    }
}

impl std::fmt::Display for TimestampType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_policy_parses_lists() {
        let p: CleanupPolicy = "compact, delete".parse().unwrap();
        assert!(p.compact() && p.delete());
        assert_eq!(p.to_string(), "compact,delete");
        assert_eq!(
            "delete,compact".parse::<CleanupPolicy>().unwrap(),
            CleanupPolicy::COMPACT_DELETE
        );
        let c: CleanupPolicy = "compact".parse().unwrap();
        assert!(c.compact() && !c.delete());
        assert!("shrink".parse::<CleanupPolicy>().is_err());
        assert!("".parse::<CleanupPolicy>().is_err());
    }

    #[test]
    fn compression_and_timestamp_round_trip() {
        for s in ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"] {
            assert_eq!(s.parse::<CompressionType>().unwrap().to_string(), s);
        }
        assert!("brotli".parse::<CompressionType>().is_err());
        for s in ["CreateTime", "LogAppendTime"] {
            assert_eq!(s.parse::<TimestampType>().unwrap().to_string(), s);
        }
        assert!("createtime".parse::<TimestampType>().is_err());
    }

    #[test]
    fn serde_uses_the_kafka_spelling() {
        let json = serde_json::to_string(&(
            CleanupPolicy::COMPACT_DELETE,
            CompressionType::Zstd,
            TimestampType::LogAppendTime,
        ))
        .unwrap();
        assert_eq!(json, r#"["compact,delete","zstd","LogAppendTime"]"#);
        let back: (CleanupPolicy, CompressionType, TimestampType) =
            serde_json::from_str(r#"["compact","none","CreateTime"]"#).unwrap();
        assert_eq!(
            back,
            (
                CleanupPolicy::COMPACT,
                CompressionType::Uncompressed,
                TimestampType::CreateTime
            )
        );
        let e = serde_json::from_str::<CompressionType>(r#""brotli""#).unwrap_err();
        assert!(e.to_string().contains("invalid compression.type"), "{e}");
        assert!(serde_json::from_str::<TimestampType>("1").is_err());
    }
}

//! A small Kafka client: enough for `nagare produce`, `nagare consume` and the
//! `nagare bench` load generator, against nagare or Apache Kafka (it uses request versions
//! both support: Produce 9, Fetch 12, Metadata 9, ListOffsets 7, all flexible).
//!
//! Requests on one connection may be pipelined: [`Connection::split`] gives a writer that
//! sends without waiting and a reader that takes the responses in order.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
const METADATA_VERSION: i16 = 9;
const LIST_OFFSETS_VERSION: i16 = 7;
/// Largest response accepted.
const MAX_RESPONSE: usize = 256 * 1024 * 1024;

#[derive(Debug, Error)]
pub enum ClientError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("broker answered error code {code} ({what})")]
    Broker { code: i16, what: &'static str },
}

type Result<T> = std::result::Result<T, ClientError>;

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One partition's fetch answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Whole record batches (the last one may be cut short by the size limit).
    pub records: Bytes,
}

/// One produce answer.
#[derive(Debug, Clone, Copy)]
pub struct Produced {
    pub correlation_id: i32,
    pub error_code: i16,
    pub base_offset: i64,
}

/// Sends requests.
pub struct Writer {
    half: OwnedWriteHalf,
    next_id: i32,
    client_id: StrBytes,
    buf: BytesMut,
}

/// Reads responses in the order the requests were sent.
pub struct Reader {
    half: BufReader<OwnedReadHalf>,
}

/// A connection to one broker.
pub struct Connection {
    pub writer: Writer,
    pub reader: Reader,
}

impl Connection {
    pub async fn connect(addr: &str) -> Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(Connection {
            writer: Writer {
                half: w,
                next_id: 1,
                client_id: StrBytes::from_static_str("nagare-client"),
                buf: BytesMut::with_capacity(64 * 1024),
            },
            reader: Reader {
                half: BufReader::with_capacity(256 * 1024, r),
            },
        })
    }

    pub fn split(self) -> (Writer, Reader) {
        (self.writer, self.reader)
    }

    /// Asks for a topic's metadata, creating it when the broker auto-creates topics;
    /// returns its partition count.
    pub async fn ensure_topic(&mut self, topic: &str) -> Result<usize> {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
            ]))
            .with_allow_auto_topic_creation(true);
        for _ in 0..50 {
            self.writer
                .send(ApiKey::Metadata, METADATA_VERSION, &req)
                .await?;
            let resp: MetadataResponse =
                self.reader.recv(ApiKey::Metadata, METADATA_VERSION).await?;
            let t = resp
                .topics
                .first()
                .ok_or_else(|| ClientError::Protocol("metadata without the topic".into()))?;
            // Kafka answers LEADER_NOT_AVAILABLE while an auto-created topic comes up.
            if t.error_code == 0 && !t.partitions.is_empty() {
                return Ok(t.partitions.len());
            }
            if t.error_code != 5 && t.error_code != 3 && t.error_code != 0 {
                return Err(ClientError::Broker {
                    code: t.error_code,
                    what: "metadata",
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Err(ClientError::Protocol(format!(
            "topic {topic} did not become available"
        )))
    }

    /// Produces one record batch and waits for the answer (none with acks=0).
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<Option<Produced>> {
        self.writer
            .send_produce(topic, partition, batch, acks)
            .await?;
        if acks == 0 {
            return Ok(None);
        }
        self.reader.recv_produce().await.map(Some)
    }

    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Fetched> {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(max_bytes)])]);
        self.writer.send(ApiKey::Fetch, FETCH_VERSION, &req).await?;
        let resp: FetchResponse = self.reader.recv(ApiKey::Fetch, FETCH_VERSION).await?;
        if resp.error_code != 0 {
            return Err(ClientError::Broker {
                code: resp.error_code,
                what: "fetch",
            });
        }
        let p = resp
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or_else(|| ClientError::Protocol("fetch without the partition".into()))?;
        Ok(Fetched {
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            records: p.records.unwrap_or_default(),
        })
    }

    /// ListOffsets: -1 latest, -2 earliest, or a timestamp.
    pub async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<i64> {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)])]);
        self.writer
            .send(ApiKey::ListOffsets, LIST_OFFSETS_VERSION, &req)
            .await?;
        let resp: ListOffsetsResponse = self
            .reader
            .recv(ApiKey::ListOffsets, LIST_OFFSETS_VERSION)
            .await?;
        let p = resp
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| ClientError::Protocol("list offsets without the partition".into()))?;
        if p.error_code != 0 {
            return Err(ClientError::Broker {
                code: p.error_code,
                what: "list offsets",
            });
        }
        Ok(p.offset)
    }
}

impl Writer {
    /// Encodes and sends one request; returns its correlation id.
    pub async fn send<T: Encodable>(&mut self, key: ApiKey, version: i16, body: &T) -> Result<i32> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(self.client_id.clone()));
        let protocol = |e: anyhow::Error| ClientError::Protocol(e.to_string());
        self.buf.clear();
        self.buf.put_i32(0);
        header
            .encode(&mut self.buf, key.request_header_version(version))
            .map_err(protocol)?;
        body.encode(&mut self.buf, version).map_err(protocol)?;
        let size = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&size.to_be_bytes());
        self.half.write_all(&self.buf).await?;
        Ok(id)
    }

    /// Sends a produce request of one batch without waiting for the answer.
    pub async fn send_produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<i32> {
        let req = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        self.send(ApiKey::Produce, PRODUCE_VERSION, &req).await
    }
}

impl Reader {
    /// Reads the next response frame: (correlation id, body after the response header).
    async fn frame(&mut self, flexible_header: bool) -> Result<(i32, Bytes)> {
        let size = self.half.read_i32().await?;
        if size < 4 || size as usize > MAX_RESPONSE {
            return Err(ClientError::Protocol(format!("response size {size}")));
        }
        let mut buf = BytesMut::zeroed(size as usize);
        self.half.read_exact(&mut buf).await?;
        let mut buf = buf.freeze();
        let id = buf.get_i32();
        if flexible_header {
            skip_tagged_fields(&mut buf)?;
        }
        Ok((id, buf))
    }

    /// Reads and decodes the next response as `T`.
    pub async fn recv<T: Decodable>(&mut self, key: ApiKey, version: i16) -> Result<T> {
        let (_, body) = self
            .frame(key.response_header_version(version) >= 1)
            .await?;
        decode(key, version, body)
    }

    /// Reads the answer to a one-batch produce request.
    pub async fn recv_produce(&mut self) -> Result<Produced> {
        let (id, body) = self.frame(true).await?;
        let resp: ProduceResponse = decode(ApiKey::Produce, PRODUCE_VERSION, body)?;
        let p = resp
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .ok_or_else(|| {
                ClientError::Protocol("produce response without the partition".into())
            })?;
        Ok(Produced {
            correlation_id: id,
            error_code: p.error_code,
            base_offset: p.base_offset,
        })
    }
}

/// Decodes a response body as `T`, after the allocation guard has walked it: the broker
/// may be any Kafka, and the codec sizes its vectors from the counts it reads.
fn decode<T: Decodable>(key: ApiKey, version: i16, mut body: Bytes) -> Result<T> {
    nagare_kafka_guard::check_response(key, version, &body)
        .map_err(|e| ClientError::Protocol(format!("{key:?} v{version} response: {e}")))?;
    T::decode(&mut body, version).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// Counts the records of the whole batches in `records` that start at or after `from`
/// (a fetch may return the batch holding `from`, with earlier records, and a partial batch
/// at the end). Returns (records, next offset to fetch).
pub fn count_records(records: &[u8], from: i64) -> (u64, i64) {
    let mut at = 0;
    let mut count = 0u64;
    let mut next = from;
    while records.len() - at >= 61 {
        let b = &records[at..];
        let base = i64::from_be_bytes(b[0..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(b[8..12].try_into().unwrap_or_default());
        if len < 49 || b.len() < len as usize + 12 {
            break;
        }
        let last_delta = i32::from_be_bytes(b[23..27].try_into().unwrap_or_default());
        let n = i32::from_be_bytes(b[57..61].try_into().unwrap_or_default());
        let last = base + last_delta as i64;
        if last >= next {
            // Records before `next` in this batch were seen already.
            count += (n as i64 - (next - base).max(0)).max(0) as u64;
            next = last + 1;
        }
        at += len as usize + 12;
    }
    (count, next)
}

fn uvarint(buf: &mut Bytes) -> Result<u32> {
    let mut v = 0u32;
    for i in 0..5 {
        if !buf.has_remaining() {
            break;
        }
        let b = buf.get_u8();
        v |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(ClientError::Protocol(
        "bad varint in response header".into(),
    ))
}

/// Skips the tagged fields of a v1 response header.
fn skip_tagged_fields(buf: &mut Bytes) -> Result<()> {
    for _ in 0..uvarint(buf)? {
        let _tag = uvarint(buf)?;
        let size = uvarint(buf)? as usize;
        if buf.remaining() < size {
            return Err(ClientError::Protocol("truncated response header".into()));
        }
        buf.advance(size);
    }
    Ok(())
}

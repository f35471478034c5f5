//! The envelope and its stored form. A record is
//! `[format byte][prev_hash: 32][hash: 32][msgpack body]`, where body is the named-field msgpack
//! of `{offset, run_id, seq, at, event}` and `hash = chain_hash(prev_hash, body)`. The hash covers
//! exactly the stored bytes, so verification never depends on re-encoding being canonical.
//!
//! A large record may be stored *out of line*: its body goes to a separate file and the index
//! keeps a stub `[2][prev_hash: 32][hash: 32][run_id: 16][seq: 8][position: 8][length: 4]`
//! (integers big-endian). The hash in the stub covers the body wherever it lives, so a body that
//! was damaged or lost is caught exactly like a damaged inline record.

use serde::{Deserialize, Serialize};

use crate::{Event, Hash, RunId, Timestamp, chain_hash};

/// Format byte of the current record layout. Never reuse a retired number.
pub const RECORD_FORMAT_V1: u8 = 1;
/// Format byte of a stub whose body is stored out of line (see the module docs).
pub const RECORD_FORMAT_EXTERNAL: u8 = 2;

/// An encoded event (the whole record) larger than this is refused; large payloads go to blobs.
pub const EVENT_BYTES_MAX: usize = 64 * 1024;

/// Bytes of `[format][prev_hash][hash]` in front of every record and stub.
pub const RECORD_HEADER_BYTES: usize = 1 + 32 + 32;
const HEADER_BYTES: usize = RECORD_HEADER_BYTES;
const EXTERNAL_STUB_BYTES: usize = HEADER_BYTES + 16 + 8 + 8 + 4;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("record of {0} bytes is shorter than its {HEADER_BYTES}-byte header")]
    Truncated(usize),
    #[error("unknown record format {0}")]
    UnknownFormat(u8),
    #[error("record body is stored out of line")]
    External,
    #[error("out-of-line record stub of {0} bytes is not {EXTERNAL_STUB_BYTES}")]
    BadStub(usize),
    #[error("record body does not decode: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    #[error("event does not encode: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("stored hash {stored} does not match the recomputed {computed}")]
    HashMismatch { stored: Hash, computed: Hash },
    #[error("event {kind} of {bytes} bytes exceeds {max}")]
    TooLarge {
        kind: &'static str,
        bytes: usize,
        max: usize,
    },
}

/// One stored event with its position (global `offset`, run `seq`) and its chain link
/// (`prev_hash`, `hash`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub offset: u64,
    pub run_id: RunId,
    pub seq: u64,
    pub at: Timestamp,
    pub prev_hash: Hash,
    pub hash: Hash,
    pub event: Event,
}

#[derive(Serialize)]
struct BodyRef<'a> {
    offset: u64,
    run_id: RunId,
    seq: u64,
    at: Timestamp,
    event: &'a Event,
}

#[derive(Deserialize)]
struct Body {
    offset: u64,
    run_id: RunId,
    seq: u64,
    at: Timestamp,
    event: Event,
}

/// The fixed-size prefix of a record, readable without decoding the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub format: u8,
    pub prev_hash: Hash,
    pub hash: Hash,
}

/// Encodes one record; returns the bytes and the new chain hash. Refuses records over
/// [`EVENT_BYTES_MAX`].
pub fn encode_record(
    offset: u64,
    run_id: RunId,
    seq: u64,
    at: Timestamp,
    prev_hash: &Hash,
    event: &Event,
) -> Result<(Vec<u8>, Hash)> {
    let mut buf = Vec::with_capacity(256);
    buf.push(RECORD_FORMAT_V1);
    buf.extend_from_slice(&[0u8; 64]);
    let body = BodyRef {
        offset,
        run_id,
        seq,
        at,
        event,
    };
    rmp_serde::encode::write_named(&mut buf, &body)?;
    if buf.len() > EVENT_BYTES_MAX {
        return Err(Error::TooLarge {
            kind: event.kind(),
            bytes: buf.len(),
            max: EVENT_BYTES_MAX,
        });
    }
    let hash = chain_hash(prev_hash, &buf[HEADER_BYTES..]);
    buf[1..33].copy_from_slice(&prev_hash.0);
    buf[33..65].copy_from_slice(&hash.0);
    Ok((buf, hash))
}

/// Reads the header of a record without touching the body.
pub fn peek_record_header(bytes: &[u8]) -> Result<RecordHeader> {
    if bytes.len() < HEADER_BYTES {
        return Err(Error::Truncated(bytes.len()));
    }
    if bytes[0] != RECORD_FORMAT_V1 && bytes[0] != RECORD_FORMAT_EXTERNAL {
        return Err(Error::UnknownFormat(bytes[0]));
    }
    let mut prev = [0u8; 32];
    let mut hash = [0u8; 32];
    prev.copy_from_slice(&bytes[1..33]);
    hash.copy_from_slice(&bytes[33..65]);
    Ok(RecordHeader {
        format: bytes[0],
        prev_hash: Hash(prev),
        hash: Hash(hash),
    })
}

/// Decodes an inline record and checks that its stored hash matches its body. Whether
/// `prev_hash` links to the previous event of the run is the caller's check (it needs that
/// event). A stub of an out-of-line record is [`Error::External`]: read its body and call
/// [`decode_record_body`].
pub fn decode_record(bytes: &[u8]) -> Result<Envelope> {
    let header = peek_record_header(bytes)?;
    if header.format == RECORD_FORMAT_EXTERNAL {
        return Err(Error::External);
    }
    decode_record_body(&header, &bytes[HEADER_BYTES..])
}

/// Where an out-of-line record's body lives, and whose event it is (readable even when the body
/// is not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalBody {
    pub run_id: RunId,
    pub seq: u64,
    /// Byte position of the body in the body file.
    pub position: u64,
    pub len: u32,
}

/// The stub that replaces an inline `record` whose body is stored at `position`.
pub fn external_stub(record: &[u8], run_id: RunId, seq: u64, position: u64) -> Result<Vec<u8>> {
    let header = peek_record_header(record)?;
    let len = u32::try_from(record.len() - HEADER_BYTES).map_err(|_| Error::TooLarge {
        kind: "record",
        bytes: record.len(),
        max: EVENT_BYTES_MAX,
    })?;
    let mut stub = Vec::with_capacity(EXTERNAL_STUB_BYTES);
    stub.push(RECORD_FORMAT_EXTERNAL);
    stub.extend_from_slice(&header.prev_hash.0);
    stub.extend_from_slice(&header.hash.0);
    stub.extend_from_slice(run_id.as_bytes());
    stub.extend_from_slice(&seq.to_be_bytes());
    stub.extend_from_slice(&position.to_be_bytes());
    stub.extend_from_slice(&len.to_be_bytes());
    Ok(stub)
}

/// The header and body location of an out-of-line record's stub.
pub fn parse_external_stub(bytes: &[u8]) -> Result<(RecordHeader, ExternalBody)> {
    let header = peek_record_header(bytes)?;
    if header.format != RECORD_FORMAT_EXTERNAL {
        return Err(Error::UnknownFormat(header.format));
    }
    if bytes.len() != EXTERNAL_STUB_BYTES {
        return Err(Error::BadStub(bytes.len()));
    }
    let rest = &bytes[HEADER_BYTES..];
    let u64_at = |i: usize| u64::from_be_bytes(rest[i..i + 8].try_into().expect("8 bytes"));
    let run = u128::from_be_bytes(rest[..16].try_into().expect("16 bytes"));
    Ok((
        header,
        ExternalBody {
            run_id: RunId::from_u128(run),
            seq: u64_at(16),
            position: u64_at(24),
            len: u32::from_be_bytes(rest[32..36].try_into().expect("4 bytes")),
        },
    ))
}

/// Decodes a record body (inline or read from the body file) under its header, checking the
/// stored hash.
pub fn decode_record_body(header: &RecordHeader, body_bytes: &[u8]) -> Result<Envelope> {
    let computed = chain_hash(&header.prev_hash, body_bytes);
    if computed != header.hash {
        return Err(Error::HashMismatch {
            stored: header.hash,
            computed,
        });
    }
    let body: Body = rmp_serde::from_slice(body_bytes)?;
    Ok(Envelope {
        offset: body.offset,
        run_id: body.run_id,
        seq: body.seq,
        at: body.at,
        prev_hash: header.prev_hash,
        hash: header.hash,
        event: body.event,
    })
}

impl Envelope {
    /// Re-encodes this envelope's record (for tests and tools; the store keeps the original
    /// bytes).
    pub fn encode(&self) -> Result<Vec<u8>> {
        encode_record(
            self.offset,
            self.run_id,
            self.seq,
            self.at,
            &self.prev_hash,
            &self.event,
        )
        .map(|(bytes, _)| bytes)
    }
}

//! Compressed `events` values: zstd with a built-in dictionary of the event shapes.
//!
//! A run's records are small msgpack maps that repeat the same field names, event kinds and ids,
//! so zstd alone gains little on one value (about 1.7×) but a great deal with a dictionary that
//! already holds them (3–4× on a value of a few records). The dictionary was trained once with
//! `zstd --train` (32 KiB) on the stored values of 400 runs of the built-in real-estate workflow
//! with varied queries, plus one record of every event kind; it is fixed forever under its id,
//! because every value compressed with it needs it back. A new dictionary gets a new id, and
//! the old one stays.
//!
//! Layout: `[COMPRESSED_FORMAT][dictionary id][zstd frame]`. The frame states its content size
//! and carries no checksum of its own: what it holds is a group of records (see `groups`), whose
//! hashes catch any damage the decoder lets through. A value is stored compressed only when that
//! makes it smaller.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::LazyLock;

use chronicle_schemas::EVENT_BYTES_MAX;
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use super::bodies::SLED_VALUE_BYTES_MAX;

/// First byte of a compressed value; distinct from every record and group format byte.
pub(crate) const COMPRESSED_FORMAT: u8 = 0x81;

/// The dictionary values are compressed with today, by id.
const DICTIONARY_ID: u8 = 1;
const DICTIONARY_1: &[u8] = include_bytes!("events-1.zdict");

/// zstd's level: its default, the best size for the time on values of about a kilobyte.
const LEVEL: i32 = 3;

/// The most a value inflates to: a group (at most the sled value limit), or one record that
/// stays inline only because it compresses below that limit (at most the event limit). Fixed, so
/// that lowering a limit never makes a stored value unreadable.
const PLAIN_BYTES_MAX: usize = 64 * 1024;
const _: () =
    assert!(EVENT_BYTES_MAX <= PLAIN_BYTES_MAX && SLED_VALUE_BYTES_MAX <= PLAIN_BYTES_MAX);

static ENCODER: LazyLock<EncoderDictionary<'static>> =
    LazyLock::new(|| EncoderDictionary::copy(DICTIONARY_1, LEVEL));
static DECODER: LazyLock<DecoderDictionary<'static>> =
    LazyLock::new(|| DecoderDictionary::copy(DICTIONARY_1));

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `plain` compressed, if that makes it smaller.
pub(crate) fn compress(plain: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with_borrow_mut(|c| {
        if c.is_none() {
            let mut new = zstd::bulk::Compressor::with_prepared_dictionary(&ENCODER).ok()?;
            new.include_checksum(false).ok()?;
            new.include_dictid(false).ok()?;
            new.include_contentsize(true).ok()?;
            *c = Some(new);
        }
        let c = c.as_mut()?;
        let mut out = vec![0u8; 2 + zstd::zstd_safe::compress_bound(plain.len())];
        out[..2].copy_from_slice(&[COMPRESSED_FORMAT, DICTIONARY_ID]);
        let written = c.compress_to_buffer(plain, &mut out[2..]).ok()?;
        out.truncate(2 + written);
        (out.len() < plain.len()).then_some(out)
    })
}

/// The plain bytes of a stored value: itself unless it is compressed. A compressed value that
/// does not decompress (damaged, an unknown dictionary, or larger than any value can be) is an
/// error saying why, worded to follow "the value".
pub(crate) fn unpack(value: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let Some((&COMPRESSED_FORMAT, rest)) = value.split_first() else {
        return Ok(Cow::Borrowed(value));
    };
    let Some((&id, frame)) = rest.split_first() else {
        return Err("has no dictionary id".into());
    };
    if id != DICTIONARY_ID {
        return Err(format!("names unknown dictionary {id}"));
    }
    DECOMPRESSOR.with_borrow_mut(|d| {
        if d.is_none() {
            let new = zstd::bulk::Decompressor::with_prepared_dictionary(&DECODER)
                .map_err(|e| format!("cannot be inflated: zstd cannot start: {e}"))?;
            *d = Some(new);
        }
        let d = d.as_mut().expect("set above");
        // The frame states its size: allocate exactly that, and never more than a value holds.
        let size = match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(n)) if n <= PLAIN_BYTES_MAX as u64 => n as usize,
            Ok(Some(n)) => return Err(format!("claims {n} bytes, more than a value holds")),
            Ok(None) | Err(_) => return Err("does not state its size".into()),
        };
        let mut plain = Vec::with_capacity(size);
        match d.decompress_to_buffer(frame, &mut plain) {
            Ok(n) if n == size => Ok(Cow::Owned(plain)),
            Ok(n) => Err(format!("holds {n} bytes but states {size}")),
            Err(e) => Err(format!("does not decompress: {e}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_never_changes() {
        // Values compressed with dictionary 1 need exactly these bytes back: a new dictionary
        // takes a new id.
        assert_eq!(
            chronicle_schemas::Hash::of_content(DICTIONARY_1).to_hex(),
            "da7a4e120515b9a721c68712d84f3f4a0956bf5ba278b770b51e779b1d040c8d"
        );
    }

    #[test]
    fn values_round_trip_and_only_shrink() {
        let record = br#"{"kind":"todo_status_changed","todo_id":"todo_001","from":"pending","to":"in_progress"}"#
            .repeat(4);
        let packed = compress(&record).expect("a repetitive value shrinks");
        assert!(packed.len() < record.len() / 2, "{}", packed.len());
        assert_eq!(packed[..2], [COMPRESSED_FORMAT, DICTIONARY_ID]);
        assert_eq!(unpack(&packed).unwrap(), &record[..]);
        // Random bytes do not shrink, and stay as they are.
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(compress(&noise), None);
        assert_eq!(unpack(&noise).unwrap(), &noise[..]);
    }

    #[test]
    fn a_bad_compressed_value_is_an_error() {
        let packed = compress(&b"abcdefgh".repeat(64)).unwrap();
        assert!(unpack(&packed[..packed.len() - 2]).is_err(), "cut short");
        let mut other = packed.clone();
        other[1] = 9;
        assert_eq!(unpack(&other).unwrap_err(), "names unknown dictionary 9");
        assert!(unpack(&[COMPRESSED_FORMAT]).is_err(), "no id");
        // A frame that claims more than any value holds is refused before it is inflated.
        let huge = zstd::bulk::compress(&vec![0u8; PLAIN_BYTES_MAX + 1], 1).unwrap();
        let mut bomb = vec![COMPRESSED_FORMAT, DICTIONARY_ID];
        bomb.extend_from_slice(&huge);
        assert!(unpack(&bomb).is_err());
    }
}

//! Named records: small mutable values kept beside the log (a thread's metadata before any run
//! exists, which run an outside protocol's run maps to). They are not events: a record is
//! replaced or deleted in place, is not chained, and `verify` does not read it. The limits here
//! are the same for every implementation.

use chronicle_schemas::EVENT_BYTES_MAX;

use crate::{Error, Result};

/// The longest record key in bytes: keys go into index keys, so they stay bounded.
pub const RECORD_KEY_BYTES_MAX: usize = 512;

/// The largest record value in bytes: the same limit as one event.
pub const RECORD_VALUE_BYTES_MAX: usize = EVENT_BYTES_MAX;

/// Refuses a key or value outside the limits (before anything is written).
pub(crate) fn check(key: &str, value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() || key.len() > RECORD_KEY_BYTES_MAX {
        return Err(Error::BadRecordKey {
            bytes: key.len(),
            max: RECORD_KEY_BYTES_MAX,
        });
    }
    match value {
        Some(v) if v.len() > RECORD_VALUE_BYTES_MAX => Err(Error::RecordTooLarge {
            bytes: v.len(),
            max: RECORD_VALUE_BYTES_MAX,
        }),
        _ => Ok(()),
    }
}

//! Wall-clock instants as UTC microseconds; stored as an integer, shown as RFC 3339.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Microseconds since the Unix epoch, UTC. The engine stamps it at append time; projections only
/// ever copy it out of events, so replays are deterministic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_micros(us: i64) -> Self {
        Self(us)
    }
    pub const fn as_micros(self) -> i64 {
        self.0
    }
    pub fn to_datetime(self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0).unwrap_or_default()
    }
    /// Seconds between two instants, as the state's durations are given (`8.5`).
    pub fn seconds_since(self, earlier: Timestamp) -> f64 {
        (self.0 - earlier.0) as f64 / 1_000_000.0
    }
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|d| Self(d.with_timezone(&Utc).timestamp_micros()))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            &self
                .to_datetime()
                .to_rfc3339_opts(SecondsFormat::Micros, true),
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.collect_str(self)
        } else {
            s.serialize_i64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            Self::parse_rfc3339(&s)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid RFC 3339 time {s:?}")))
        } else {
            i64::deserialize(d).map(Self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_round_trips() {
        let t = Timestamp(1_759_658_400_123_456);
        assert_eq!(t.to_string(), "2025-10-05T10:00:00.123456Z");
        assert_eq!(Timestamp::parse_rfc3339(&t.to_string()), Some(t));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    }
}

//! [`LazyValue`]: a JSON value that binary encodings carry as its own bytes, decoded when read.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A JSON value that a binary encoding (a run's snapshots) carries as the value's own msgpack
/// bytes, decoded only when it is first read; a human-readable one (JSON) sees the value itself.
///
/// A long run's state holds one agent result per TODO, and decoding them was most of loading the
/// run from its snapshot, though a command that loads it (`/checkpoint list`, a decision) reads
/// none of them. Cheap to clone; compared by value.
#[derive(Clone)]
pub struct LazyValue(Arc<Inner>);

/// At least one of the two is set; the other is made from it when first needed.
struct Inner {
    /// The value's msgpack encoding: what it was decoded from, or made when first written.
    bytes: OnceLock<Box<[u8]>>,
    value: OnceLock<Value>,
}

impl LazyValue {
    pub fn new(value: Value) -> Self {
        LazyValue(Arc::new(Inner {
            bytes: OnceLock::new(),
            value: OnceLock::from(value),
        }))
    }

    fn from_bytes(bytes: Box<[u8]>) -> Self {
        LazyValue(Arc::new(Inner {
            bytes: OnceLock::from(bytes),
            value: OnceLock::new(),
        }))
    }

    /// The value, decoded on first use. Bytes that do not decode read as `null`; they only ever
    /// come from a snapshot, which is checked whole (its hash) before it is decoded.
    pub fn get(&self) -> &Value {
        self.0.value.get_or_init(|| {
            self.0
                .bytes
                .get()
                .and_then(|b| rmp_serde::from_slice(b).ok())
                .unwrap_or(Value::Null)
        })
    }
}

impl Deref for LazyValue {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.get()
    }
}

impl From<Value> for LazyValue {
    fn from(value: Value) -> Self {
        LazyValue::new(value)
    }
}

impl PartialEq for LazyValue {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.get() == other.get()
    }
}

impl fmt::Debug for LazyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for LazyValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return self.get().serialize(s);
        }
        // Encoded once: a long run's state goes into a snapshot again and again.
        let bytes = match self.0.bytes.get() {
            Some(bytes) => bytes,
            None => {
                let bytes = rmp_serde::to_vec(self.get()).map_err(serde::ser::Error::custom)?;
                self.0.bytes.get_or_init(|| bytes.into_boxed_slice())
            }
        };
        s.serialize_bytes(bytes)
    }
}

impl<'de> Deserialize<'de> for LazyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return Value::deserialize(d).map(LazyValue::new);
        }
        d.deserialize_any(LazyVisitor)
    }
}

/// Bytes are kept as they are; anything else (a value a binary encoding wrote in place, as
/// snapshots did before values were kept as bytes) is decoded into the value.
struct LazyVisitor;

impl<'de> Visitor<'de> for LazyVisitor {
    type Value = LazyValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the bytes of a msgpack value, or a value")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<LazyValue, E> {
        Ok(LazyValue::from_bytes(v.into()))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<LazyValue, E> {
        Ok(LazyValue::from_bytes(v.into_boxed_slice()))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<LazyValue, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(LazyValue::new)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<LazyValue, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(LazyValue::new)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<LazyValue, E> {
        Ok(Value::from(v).into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<LazyValue, E> {
        Ok(Value::from(v).into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LazyValue, E> {
        Ok(Value::from(v).into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<LazyValue, E> {
        Ok(Value::from(v).into())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LazyValue, E> {
        Ok(Value::from(v).into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<LazyValue, E> {
        Ok(Value::Null.into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value() -> Value {
        json!({"listings": [{"price": 1.5, "area": "Gangnam", "ok": true}], "n": -3, "none": null})
    }

    #[test]
    fn msgpack_carries_the_bytes_and_json_the_value() {
        let lazy = LazyValue::new(value());
        assert!(lazy.0.bytes.get().is_none());
        let packed = rmp_serde::to_vec_named(&lazy).unwrap();
        assert!(lazy.0.bytes.get().is_some(), "encoded once, then kept");
        assert_eq!(rmp_serde::to_vec_named(&lazy).unwrap(), packed);
        let back: LazyValue = rmp_serde::from_slice(&packed).unwrap();
        assert!(
            back.0.bytes.get().is_some() && back.0.value.get().is_none(),
            "not decoded yet"
        );
        assert_eq!(back.get(), &value());
        assert_eq!(back, lazy);
        // Written again, the kept bytes go out as they came in.
        assert_eq!(rmp_serde::to_vec_named(&back).unwrap(), packed);
        assert_eq!(serde_json::to_value(&back).unwrap(), value());
        let from_json: LazyValue = serde_json::from_value(value()).unwrap();
        assert_eq!(*from_json, value());
    }

    #[test]
    fn a_value_written_in_place_still_reads() {
        for v in [
            value(),
            json!([1, "two"]),
            json!("text"),
            json!(7),
            json!(-7),
            json!(2.5),
        ]
        .into_iter()
        .chain([json!(true), Value::Null])
        {
            let packed = rmp_serde::to_vec_named(&v).unwrap();
            let back: LazyValue = rmp_serde::from_slice(&packed).unwrap();
            assert_eq!(*back, v);
        }
    }

    #[test]
    fn bytes_that_do_not_decode_read_as_null() {
        let packed = rmp_serde::to_vec(&serde_bytes_of(&[0xc1])).unwrap();
        let back: LazyValue = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(*back, Value::Null);
    }

    /// `bytes` as msgpack bin.
    fn serde_bytes_of(bytes: &[u8]) -> impl Serialize + '_ {
        struct Bin<'a>(&'a [u8]);
        impl Serialize for Bin<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        Bin(bytes)
    }
}

//! The chain hash: `hash = blake3(prev_hash ‖ body)` in a domain-separated key derivation mode.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The blake3 derive-key context; changing it would orphan every stored chain.
const CHAIN_CONTEXT: &str = "chronicle event v1";

/// A 32-byte blake3 digest; hex in JSON, raw bytes in msgpack.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    pub const ZERO: Hash = Hash([0; 32]);

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Self(out))
    }
    /// Content address of a blob (plain blake3, no chain context).
    pub fn of_content(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }
}

/// The chain link of one event: `prev_hash` is the previous event of the same run (zeros for
/// seq 0), `body` the exact msgpack bytes that are stored, so a verifier never re-encodes.
pub fn chain_hash(prev_hash: &Hash, body: &[u8]) -> Hash {
    // Deriving the key costs about as much as hashing a small event: derive it once.
    static KEYED: std::sync::LazyLock<blake3::Hasher> =
        std::sync::LazyLock::new(|| blake3::Hasher::new_derive_key(CHAIN_CONTEXT));
    let mut h = KEYED.clone();
    h.update(&prev_hash.0);
    h.update(body);
    Hash(*h.finalize().as_bytes())
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_hex())
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for Hash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Hash;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("32 bytes or 64 hex characters")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Hash, E> {
                Hash::from_hex(v).ok_or_else(|| E::custom(format!("invalid hash {v:?}")))
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Hash, E> {
                let arr: [u8; 32] = v
                    .try_into()
                    .map_err(|_| E::custom(format!("hash of {} bytes, expected 32", v.len())))?;
                Ok(Hash(arr))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Hash, A::Error> {
                let mut out = [0u8; 32];
                for (i, b) in out.iter_mut().enumerate() {
                    *b = a
                        .next_element()?
                        .ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                }
                Ok(Hash(out))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(V)
        } else {
            d.deserialize_bytes(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_hash_depends_on_prev_and_body() {
        let a = chain_hash(&Hash::ZERO, b"body");
        assert_ne!(a, chain_hash(&Hash::ZERO, b"bodz"));
        assert_ne!(a, chain_hash(&a, b"body"));
        // Domain separation: not the plain blake3 of the concatenation.
        let mut plain = Vec::from([0u8; 32]);
        plain.extend_from_slice(b"body");
        assert_ne!(a, Hash::of_content(&plain));
    }

    #[test]
    fn hash_serde_hex_and_bytes() {
        let h = Hash::of_content(b"x");
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, format!("\"{}\"", h.to_hex()));
        assert_eq!(serde_json::from_str::<Hash>(&json).unwrap(), h);
        let mp = rmp_serde::to_vec_named(&h).unwrap();
        assert_eq!(mp.len(), 34, "bin8 header + 32 bytes");
        assert_eq!(rmp_serde::from_slice::<Hash>(&mp).unwrap(), h);
    }
}

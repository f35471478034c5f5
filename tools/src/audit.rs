//! `audit export` and `audit verify` (stub; being written).

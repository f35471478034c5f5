//! `run` and `chat` (stub; being written).

//! `log`, `runs`, `checkpoints`, `restore`, `verify` (stub; being written).

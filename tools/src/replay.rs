//! `replay`: the time-travel debugger (stub; being written).

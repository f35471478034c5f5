//! The `chronicle` binary, black-box: one integration-test binary for the CLI.
mod cli_agents;
mod cli_bench;
mod cli_chat;
mod cli_inspect;
mod cli_mcp;
mod cli_remote;
mod cli_run;
mod cli_sessions;
mod cluster;
mod durability;
mod lazyfs;
mod otel;
mod postgres;
mod readme;
mod serve_bounds;

/// Taken by the tests that load the whole machine (several servers under load) and by those
/// whose timing they could starve (a streamed answer racing a model call's timeout), so that
/// they never run at once on a small machine.
pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! OpenTelemetry export of runs: each run's spans (folded from its events by
//! `chronicle_projections::trace`) sent over OTLP as they end ([`live`]), or after the fact from
//! the log ([`otlp::otlp_json`], [`live::export_once`]). Configured by the standard `OTEL_*`
//! environment variables, and off unless an OTLP endpoint is set.

pub mod live;
pub mod otlp;

pub use live::{Export, TraceStats, export_once, start};
pub use otlp::{Config, ConfigError, otlp_json};

//! A run's spans in OpenTelemetry's terms, the exporter the standard `OTEL_*` environment
//! variables describe, and OTLP JSON.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronicle_projections::trace::{AttrValue, Span, SpanKind, SpanStatus};
use opentelemetry::trace::{self as ot, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

/// The instrumentation scope every span names.
pub const SCOPE: &str = "chronicle";

/// What is wrong with the telemetry configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}: {message}")]
    Var { var: &'static str, message: String },
    #[error("the OTLP exporter could not be built: {0}")]
    Build(String),
}

fn bad(var: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Var {
        var,
        message: message.into(),
    }
}

/// How runs are chosen for tracing (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), decided
/// once per run, on its trace id, so a run's trace is whole or absent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
    /// A run started under a caller's trace follows the caller's choice; others, the inner one.
    ParentBased(Root),
}

/// The choice of a parent-based sampler for runs without a caller's trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Root {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

impl Root {
    fn sampled(self, trace_id: [u8; 16]) -> bool {
        match self {
            Root::AlwaysOn => true,
            Root::AlwaysOff => false,
            Root::Ratio(r) => ratio_sampled(r, trace_id),
        }
    }
}

/// The trace-id ratio rule of OpenTelemetry's SDKs: the id's low 63 bits against the ratio.
fn ratio_sampled(ratio: f64, trace_id: [u8; 16]) -> bool {
    let mut low = [0u8; 8];
    low.copy_from_slice(&trace_id[8..]);
    let rnd = u64::from_be_bytes(low) >> 1;
    let bound = (ratio.clamp(0.0, 1.0) * (1u64 << 63) as f64) as u64;
    rnd < bound
}

impl Sampler {
    /// Whether a run with `trace_id` (and the sampled flag of its caller's `traceparent`, if
    /// it had one) is traced.
    pub fn sampled(self, trace_id: [u8; 16], caller: Option<bool>) -> bool {
        match self {
            Sampler::AlwaysOn => true,
            Sampler::AlwaysOff => false,
            Sampler::Ratio(r) => ratio_sampled(r, trace_id),
            Sampler::ParentBased(root) => caller.unwrap_or_else(|| root.sampled(trace_id)),
        }
    }

    fn from_vars(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, ConfigError> {
        const VAR: &str = "OTEL_TRACES_SAMPLER";
        let ratio = || -> Result<f64, ConfigError> {
            match arg {
                None => Ok(1.0),
                Some(a) => a
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| {
                        bad(
                            "OTEL_TRACES_SAMPLER_ARG",
                            format!("a ratio from 0 to 1, got {a:?}"),
                        )
                    }),
            }
        };
        Ok(
            match name.map(str::trim).unwrap_or("parentbased_always_on") {
                "always_on" => Sampler::AlwaysOn,
                "always_off" => Sampler::AlwaysOff,
                "traceidratio" => Sampler::Ratio(ratio()?),
                "parentbased_always_on" => Sampler::ParentBased(Root::AlwaysOn),
                "parentbased_always_off" => Sampler::ParentBased(Root::AlwaysOff),
                "parentbased_traceidratio" => Sampler::ParentBased(Root::Ratio(ratio()?)),
                other => {
                    return Err(bad(
                        VAR,
                        format!(
                            "one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio; got {other:?}"
                        ),
                    ));
                }
            },
        )
    }
}

/// The OTLP transport (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    HttpProtobuf,
    HttpJson,
    Grpc,
}

/// The trace export the environment asks for.
#[derive(Clone, Debug)]
pub struct Config {
    pub transport: Transport,
    pub sampler: Sampler,
    /// Spans waiting for export at most; more are dropped, and counted (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub queue_spans: usize,
    /// Spans sent in one export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub batch_spans: usize,
    /// How long spans wait for a batch to fill (`OTEL_BSP_SCHEDULE_DELAY`, ms).
    pub delay: Duration,
    /// How long one export may take (`OTEL_BSP_EXPORT_TIMEOUT`, ms).
    pub export_timeout: Duration,
}

/// The names of the variables that turn export on: an endpoint for traces.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

impl Config {
    /// The export the process environment asks for: `None` unless an OTLP endpoint is set (and
    /// `OTEL_SDK_DISABLED` is not `true`, and `OTEL_TRACES_EXPORTER` is not `none`).
    pub fn from_env() -> Result<Option<Config>, ConfigError> {
        Config::from_vars(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    }

    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, ConfigError> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(bad(
                    "OTEL_TRACES_EXPORTER",
                    format!("`otlp` or `none` are supported, got {other:?}"),
                ));
            }
        }
        if ENDPOINT_VARS.iter().all(|k| var(k).is_none()) {
            return Ok(None);
        }
        let (pvar, protocol) = [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|k| var(k).map(|v| (k, v)))
        .unwrap_or(("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()));
        let transport = match protocol.trim() {
            "http/protobuf" => Transport::HttpProtobuf,
            "http/json" => Transport::HttpJson,
            "grpc" => Transport::Grpc,
            other => {
                return Err(bad(
                    pvar,
                    format!("one of http/protobuf, http/json, grpc; got {other:?}"),
                ));
            }
        };
        let number = |k: &'static str, default: u64, max: u64| -> Result<u64, ConfigError> {
            match var(k) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| bad(k, format!("a whole number from 1 to {max}, got {v:?}"))),
            }
        };
        Ok(Some(Config {
            transport,
            sampler: Sampler::from_vars(
                var("OTEL_TRACES_SAMPLER").as_deref(),
                var("OTEL_TRACES_SAMPLER_ARG").as_deref(),
            )?,
            queue_spans: number("OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1 << 20)? as usize,
            batch_spans: number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1 << 16)? as usize,
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000, 3_600_000)?),
            export_timeout: Duration::from_millis(number(
                "OTEL_BSP_EXPORT_TIMEOUT",
                30_000,
                3_600_000,
            )?),
        }))
    }

    /// The OTLP exporter (endpoint, headers, timeout and compression from the environment), with
    /// the process's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; the service is
    /// `chronicle` unless named).
    pub fn exporter(&self) -> Result<opentelemetry_otlp::SpanExporter, ConfigError> {
        let built = match self.transport {
            Transport::HttpProtobuf | Transport::HttpJson => {
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(match self.transport {
                        Transport::HttpJson => Protocol::HttpJson,
                        _ => Protocol::HttpBinary,
                    })
                    .build()
            }
            Transport::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_protocol(Protocol::Grpc)
                .build(),
        };
        let mut exporter = built.map_err(|e| ConfigError::Build(e.to_string()))?;
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource());
        Ok(exporter)
    }
}

/// The resource spans are sent with.
pub fn resource() -> Resource {
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    let builder = Resource::builder();
    match named {
        true => builder.build(),
        false => builder.with_service_name("chronicle").build(),
    }
}

fn system_time(t: chronicle_schemas::Timestamp) -> SystemTime {
    let us = t.as_micros();
    match u64::try_from(us) {
        Ok(us) => UNIX_EPOCH + Duration::from_micros(us),
        Err(_) => UNIX_EPOCH,
    }
}

fn value(v: &AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => Value::from(s.clone()),
        AttrValue::Int(n) => Value::I64(*n),
        AttrValue::Bool(b) => Value::Bool(*b),
        AttrValue::StrList(l) => Value::Array(opentelemetry::Array::String(
            l.iter().map(|s| s.clone().into()).collect(),
        )),
    }
}

fn attributes(attrs: &[(&'static str, AttrValue)]) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| KeyValue::new(*k, value(v)))
        .collect()
}

/// A span of a run as the OpenTelemetry SDK's exporters take it.
pub fn span_data(s: &Span) -> SpanData {
    let mut events = SpanEvents::default();
    events.events = s
        .events
        .iter()
        .map(|e| {
            ot::Event::new(
                e.name.clone(),
                system_time(e.at),
                attributes(&e.attributes),
                0,
            )
        })
        .collect();
    let context = ot::SpanContext::new(
        ot::TraceId::from_bytes(s.trace_id.0),
        ot::SpanId::from_bytes(s.span_id.0),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    SpanData {
        span_context: context,
        parent_span_id: s
            .parent
            .map_or(ot::SpanId::INVALID, |p| ot::SpanId::from_bytes(p.0)),
        parent_span_is_remote: s.remote_parent,
        span_kind: match s.kind {
            SpanKind::Internal => ot::SpanKind::Internal,
            SpanKind::Client => ot::SpanKind::Client,
        },
        name: Cow::Owned(s.name.clone()),
        start_time: system_time(s.start),
        end_time: system_time(s.end),
        attributes: attributes(&s.attributes),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match &s.status {
            SpanStatus::Unset => ot::Status::Unset,
            SpanStatus::Ok => ot::Status::Ok,
            SpanStatus::Error(e) => ot::Status::error(e.clone()),
        },
        instrumentation_scope: InstrumentationScope::builder(SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}

/// Spans as an OTLP/JSON `ExportTraceServiceRequest` (what `/v1/traces` takes as JSON, and what
/// an OTLP file exporter writes).
pub fn otlp_json(spans: &[Span]) -> serde_json::Value {
    let data = spans.iter().map(span_data).collect();
    let resource = ResourceAttributesWithSchema::from(&resource());
    let request = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(data, &resource),
    };
    let mut json = serde_json::to_value(request).unwrap_or_default();
    // The resource's attributes come out of a hash map: in key order, the same trace prints the
    // same every time.
    for rs in json["resourceSpans"].as_array_mut().into_iter().flatten() {
        if let Some(attrs) = rs["resource"]["attributes"].as_array_mut() {
            attrs.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
        }
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set() {
        assert!(Config::from_vars(vars(&[])).unwrap().is_none());
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        let c = Config::from_vars(vars(&on)).unwrap().unwrap();
        assert_eq!(c.transport, Transport::HttpProtobuf);
        assert_eq!(c.sampler, Sampler::ParentBased(Root::AlwaysOn));
        let off = [on[0], ("OTEL_TRACES_EXPORTER", "none")];
        assert!(Config::from_vars(vars(&off)).unwrap().is_none());
        let disabled = [on[0], ("OTEL_SDK_DISABLED", "true")];
        assert!(Config::from_vars(vars(&disabled)).unwrap().is_none());
    }

    #[test]
    fn bad_settings_are_named() {
        let on = (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4317",
        );
        for (pair, var) in [
            (
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "udp"),
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (("OTEL_TRACES_SAMPLER", "sometimes"), "OTEL_TRACES_SAMPLER"),
            (("OTEL_BSP_MAX_QUEUE_SIZE", "0"), "OTEL_BSP_MAX_QUEUE_SIZE"),
            (("OTEL_TRACES_EXPORTER", "zipkin"), "OTEL_TRACES_EXPORTER"),
        ] {
            let err = Config::from_vars(vars(&[on, pair]))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(var), "{err}");
        }
        let ratio = [
            on,
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
        ];
        let err = Config::from_vars(vars(&ratio)).unwrap_err().to_string();
        assert!(err.starts_with("OTEL_TRACES_SAMPLER_ARG"), "{err}");
    }

    #[test]
    fn sampling_follows_the_caller_and_the_ratio() {
        let parent = Sampler::ParentBased(Root::AlwaysOff);
        assert!(parent.sampled([1; 16], Some(true)));
        assert!(!parent.sampled([1; 16], None));
        assert!(Sampler::AlwaysOn.sampled([1; 16], Some(false)));
        let half = Sampler::Ratio(0.5);
        let kept = (0u8..=255)
            .filter(|b| {
                let mut id = [0u8; 16];
                id[8] = *b;
                half.sampled(id, None)
            })
            .count();
        assert_eq!(kept, 128);
    }
}

//! The two text formats `/metrics` speaks. prometheus-client writes OpenMetrics; Prometheus asks
//! for it, but the older text format (0.0.4) is what other scrapers and `promtool check metrics`
//! read, and the two differ in how a counter is named: OpenMetrics gives the family `x` and its
//! sample `x_total`, while 0.0.4 wants `HELP` and `TYPE` to name the sample itself.

/// OpenMetrics' content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The Prometheus text format's content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics (Prometheus does, ahead of the older format).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// Rewrites OpenMetrics text as the Prometheus text format: a counter's `HELP` and `TYPE` name
/// its `_total` sample, and the lines 0.0.4 lacks (`UNIT`, `EOF`) go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.insert(name.to_owned());
        }
    }
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_by_their_sample() {
        let om = "# HELP c_x Things.\n# TYPE c_x counter\nc_x_total 3\n\
                  # HELP c_d_seconds Time.\n# TYPE c_d_seconds histogram\n# UNIT c_d_seconds seconds\n\
                  c_d_seconds_sum 1.0\nc_d_seconds_count 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP c_x_total Things.\n# TYPE c_x_total counter\nc_x_total 3\n\
             # HELP c_d_seconds Time.\n# TYPE c_d_seconds histogram\n\
             c_d_seconds_sum 1.0\nc_d_seconds_count 1\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(None));
    }
}

//! JSON containment, as LangGraph's `metadata` and `values` filters match threads and
//! checkpoints: every key of a filter object with a contained value, every element of a filter
//! array in some element. A filter is checked against [`FILTER_VALUES_MAX`],
//! [`FILTER_DEPTH_MAX`] and [`FILTER_BYTES_MAX`] before it is used, because matching costs up to
//! its size times the matched value's.

use chronicle_wire::langgraph::{FILTER_BYTES_MAX, FILTER_DEPTH_MAX, FILTER_VALUES_MAX};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A filter too large to match with.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FilterError {
    #[error("the `{field}` filter holds more than {FILTER_VALUES_MAX} JSON values")]
    Values { field: &'static str },
    #[error("the `{field}` filter nests deeper than {FILTER_DEPTH_MAX} levels")]
    Depth { field: &'static str },
    #[error("the `{field}` filter holds more than {FILTER_BYTES_MAX} bytes of keys and strings")]
    Bytes { field: &'static str },
}

impl From<FilterError> for ApiError {
    fn from(e: FilterError) -> Self {
        ApiError::unprocessable(e.to_string())
    }
}

/// `filter` (the request's `field`) as a value to match with, once it is within the bounds.
pub(crate) fn checked(
    field: &'static str,
    filter: &Map<String, Value>,
) -> Result<Value, FilterError> {
    let mut size = Size::default();
    for (k, v) in filter {
        size.bytes += k.len();
        size.walk(v, 2).map_err(|e| e.of(field))?;
    }
    size.count(1).map_err(|e| e.of(field))?;
    Ok(Value::Object(filter.clone()))
}

/// Which bound a filter crossed, before the field is known.
#[derive(Debug)]
enum Over {
    Values,
    Depth,
    Bytes,
}

impl Over {
    fn of(self, field: &'static str) -> FilterError {
        match self {
            Over::Values => FilterError::Values { field },
            Over::Depth => FilterError::Depth { field },
            Over::Bytes => FilterError::Bytes { field },
        }
    }
}

#[derive(Debug, Default)]
struct Size {
    values: usize,
    bytes: usize,
}

impl Size {
    fn count(&mut self, values: usize) -> Result<(), Over> {
        self.values += values;
        if self.values > FILTER_VALUES_MAX {
            return Err(Over::Values);
        }
        if self.bytes > FILTER_BYTES_MAX {
            return Err(Over::Bytes);
        }
        Ok(())
    }

    /// Counts `v`, at nesting `depth`; stops at the first bound crossed.
    fn walk(&mut self, v: &Value, depth: usize) -> Result<(), Over> {
        if depth > FILTER_DEPTH_MAX {
            return Err(Over::Depth);
        }
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    self.bytes += k.len();
                    self.walk(v, depth + 1)?;
                }
            }
            Value::Array(a) => {
                for v in a {
                    self.walk(v, depth + 1)?;
                }
            }
            Value::String(s) => self.bytes += s.len(),
            _ => {}
        }
        self.count(1)
    }
}

/// Does `have` contain `want` (JSON containment: every key of an object with a contained
/// value, every element of an array in some element)?
pub(crate) fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| contains(hv, v))),
        (Value::Array(h), Value::Array(w)) => w.iter().all(|v| h.iter().any(|hv| contains(hv, v))),
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn containment_is_by_key_and_by_element() {
        let have = json!({"a": 1, "tags": ["x", "y"], "o": {"p": [1, {"q": 2}]}});
        for want in [
            json!({}),
            json!({"a": 1}),
            json!({"tags": ["y"]}),
            json!({"o": {"p": [{"q": 2}]}}),
        ] {
            assert!(contains(&have, &want), "{want}");
        }
        for want in [
            json!({"a": 2}),
            json!({"b": 1}),
            json!({"tags": ["z"]}),
            json!({"o": {"p": [{"q": 3}]}}),
        ] {
            assert!(!contains(&have, &want), "{want}");
        }
    }

    #[test]
    fn a_filter_is_bounded_at_each_limit() {
        // At the bound: the object and FILTER_VALUES_MAX - 2 elements in one array.
        let at = json!({"k": vec![1; FILTER_VALUES_MAX - 2]});
        assert!(checked("metadata", &map(at)).is_ok());
        let over = json!({"k": vec![1; FILTER_VALUES_MAX - 1]});
        assert_eq!(
            checked("metadata", &map(over)),
            Err(FilterError::Values { field: "metadata" })
        );
        // Depth: the filter object is 1, each nested object one more.
        let mut deep = json!(1);
        for _ in 0..FILTER_DEPTH_MAX - 1 {
            deep = json!({ "k": deep });
        }
        assert!(checked("values", &map(deep.clone())).is_ok());
        let deeper = json!({ "k": deep });
        assert_eq!(
            checked("values", &map(deeper)),
            Err(FilterError::Depth { field: "values" })
        );
        let long = json!({"k": "x".repeat(FILTER_BYTES_MAX)});
        assert_eq!(
            checked("values", &map(long)),
            Err(FilterError::Bytes { field: "values" })
        );
        assert!(
            checked(
                "values",
                &map(json!({"k": "x".repeat(FILTER_BYTES_MAX - 1)}))
            )
            .is_ok()
        );
    }
}

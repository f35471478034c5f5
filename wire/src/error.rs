//! The error body every API failure sends: `{"error": {"code", "message"}}`, plus extra top-level
//! fields some answers carry (a refused command's `help`, the pending approval of a chat turn
//! that waits for a human).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{"error": {"code", "message"}, ...extra}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// Top-level fields beside `error`.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What failed: a stable machine `code` (`not_found`, `conflict`, ...) and a message for people.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
            },
            extra: Map::new(),
        }
    }

    /// The body with `extra`'s fields beside `error` (a non-object adds nothing).
    pub fn with_extra(mut self, extra: Value) -> Self {
        if let Value::Object(m) = extra {
            self.extra.extend(m);
        }
        self
    }

    /// The help text a refused slash command comes with.
    pub fn help(&self) -> Option<&str> {
        self.extra.get("help").and_then(Value::as_str)
    }

    /// The extra fields read as `T` (e.g. [`crate::ChatWaiting`] of a chat turn's 409).
    pub fn extra_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(Value::Object(self.extra.clone()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_error_shape_with_and_without_extra_fields() {
        let plain = ErrorBody::new("not_found", "run x not found");
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"error": {"code": "not_found", "message": "run x not found"}})
        );
        let with_help =
            ErrorBody::new("bad_request", "Unknown command").with_extra(json!({"help": "h"}));
        let v = serde_json::to_value(&with_help).unwrap();
        assert_eq!(
            v,
            json!({"error": {"code": "bad_request", "message": "Unknown command"}, "help": "h"})
        );
        let back: ErrorBody = serde_json::from_value(v).unwrap();
        assert_eq!(back, with_help);
        assert_eq!(back.help(), Some("h"));
    }
}

//! How a tool call can end without an output.

/// Why a call gave no output. The recorded form (`ToolCallCompleted.error`) is the `Display`
/// text, whose prefix (`failed: `, `rejected: `, `refused: `, `cancelled: `) is part of the
/// stored format, so an answer replayed from the log is the same error the first execution gave.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The tool ran and failed.
    #[error("failed: {0}")]
    Failed(String),
    /// A human rejected the call (or its approval expired under `on_expiry: reject`). The host
    /// refuses the same call (same tool, same args) for the rest of the attempt.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The host did not run the call: an unknown tool, a repeat of a rejected call, no run.
    #[error("refused: {0}")]
    Refused(String),
    /// The model asked for the call before the run stopped (a crash) or went back (a restore),
    /// and it was never made; the model is told so instead of being left without a result.
    #[error("cancelled: {0}")]
    Cancelled(String),
}

impl ToolError {
    /// Back from the recorded text.
    pub(crate) fn from_recorded(text: &str) -> Self {
        if let Some(m) = text.strip_prefix("rejected: ") {
            ToolError::Rejected(m.to_owned())
        } else if let Some(m) = text.strip_prefix("refused: ") {
            ToolError::Refused(m.to_owned())
        } else if let Some(m) = text.strip_prefix("cancelled: ") {
            ToolError::Cancelled(m.to_owned())
        } else {
            ToolError::Failed(text.strip_prefix("failed: ").unwrap_or(text).to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_errors_come_back_as_they_were() {
        for e in [
            ToolError::Failed("no such file: /workspace/a".into()),
            ToolError::Rejected("rejected by alice: not now".into()),
            ToolError::Refused("unknown tool shell".into()),
            ToolError::Cancelled("the run was restored".into()),
        ] {
            assert_eq!(ToolError::from_recorded(&e.to_string()), e);
        }
    }
}

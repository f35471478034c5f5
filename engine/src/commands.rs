//! The slash-command grammar, parsed in one place for the API, the WebSocket and the CLI.
//! Executing a command is the run actor's job; its help text is the deployment's
//! (`texts::Text::Help`).

/// One parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Todos,
    /// `/todo approve [<approval_id>|<todo_id>|all]`
    Approve {
        target: Option<String>,
    },
    /// `/todo reject [<id>] [reason]` — whether the first word is an id is decided against the
    /// run's state, so it is kept in `words`.
    Reject {
        words: Vec<String>,
    },
    Skip {
        todo: String,
        reason: Option<String>,
    },
    Add {
        agent: String,
        after: Vec<String>,
    },
    Update {
        todo: String,
        status: String,
    },
    CheckpointList,
    CheckpointRestore {
        checkpoint: String,
    },
    Help,
}

/// Parses one command line; the error says what is wrong.
pub fn parse(text: &str) -> Result<Command, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let rest =
        |from: usize| -> Option<String> { (words.len() > from).then(|| words[from..].join(" ")) };
    match words.as_slice() {
        [] => Err("empty command".into()),
        ["/todos"] => Ok(Command::Todos),
        ["/help"] => Ok(Command::Help),
        ["/todo", "approve"] => Ok(Command::Approve { target: None }),
        ["/todo", "approve", id] => Ok(Command::Approve {
            target: Some((*id).to_owned()),
        }),
        ["/todo", "approve", ..] => {
            Err("usage: /todo approve [<approval_id>|<todo_id>|all]".into())
        }
        ["/todo", "reject", rest @ ..] => Ok(Command::Reject {
            words: rest.iter().map(|w| (*w).to_owned()).collect(),
        }),
        ["/todo", "skip", id, ..] => Ok(Command::Skip {
            todo: (*id).to_owned(),
            reason: rest(3),
        }),
        ["/todo", "skip"] => Err("usage: /todo skip <todo_id> [reason]".into()),
        ["/todo", "add", agent] => Ok(Command::Add {
            agent: (*agent).to_owned(),
            after: vec![],
        }),
        ["/todo", "add", agent, "after", ids] => Ok(Command::Add {
            agent: (*agent).to_owned(),
            after: ids
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
        ["/todo", "add", ..] => Err("usage: /todo add <agent> [after <id>[,<id>]]".into()),
        ["/todo", "update", id, status] => Ok(Command::Update {
            todo: (*id).to_owned(),
            status: (*status).to_owned(),
        }),
        ["/todo", "update", ..] => Err("usage: /todo update <todo_id> <status>".into()),
        ["/checkpoint", "list"] => Ok(Command::CheckpointList),
        ["/checkpoint", "restore", id] => Ok(Command::CheckpointRestore {
            checkpoint: (*id).to_owned(),
        }),
        ["/checkpoint", "restore", ..] => Err("usage: /checkpoint restore <checkpoint_id>".into()),
        [first, ..] if !first.starts_with('/') => {
            Err(format!("not a command: {first:?} (commands start with /)"))
        }
        _ => Err("Unknown command".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        use Command::*;
        let ok = [
            ("/todos", Todos),
            ("  /help ", Help),
            ("/todo approve", Approve { target: None }),
            (
                "/todo approve all",
                Approve {
                    target: Some("all".into()),
                },
            ),
            (
                "/todo reject todo_002 too risky",
                Reject {
                    words: vec!["todo_002".into(), "too".into(), "risky".into()],
                },
            ),
            (
                "/todo skip todo_001",
                Skip {
                    todo: "todo_001".into(),
                    reason: None,
                },
            ),
            (
                "/todo skip todo_001 not needed now",
                Skip {
                    todo: "todo_001".into(),
                    reason: Some("not needed now".into()),
                },
            ),
            (
                "/todo add analysis_team",
                Add {
                    agent: "analysis_team".into(),
                    after: vec![],
                },
            ),
            (
                "/todo add analysis_team after todo_001,todo_002",
                Add {
                    agent: "analysis_team".into(),
                    after: vec!["todo_001".into(), "todo_002".into()],
                },
            ),
            (
                "/todo update todo_001 completed",
                Update {
                    todo: "todo_001".into(),
                    status: "completed".into(),
                },
            ),
            ("/checkpoint list", CheckpointList),
            (
                "/checkpoint restore cp_004",
                CheckpointRestore {
                    checkpoint: "cp_004".into(),
                },
            ),
        ];
        for (text, want) in ok {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "/todo",
            "/todo approve a b",
            "/todo skip",
            "/todo add",
            "/todo add x before y",
            "/todo update todo_001",
            "/checkpoint",
            "/checkpoint restore",
            "/frobnicate",
            "hello",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must not parse");
        }
        assert_eq!(parse("/frobnicate"), Err("Unknown command".into()));
    }
}

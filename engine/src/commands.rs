//! The slash-command grammar, in one place for the API, the WebSocket, the CLI, the run actor
//! (which carries the commands out, `runtime/actor/commands/`) and the reading of plain words
//! ([`crate::said`], which checks that a model's answer is a command). It imports nothing from
//! the crate: both sides of the engine use it.
//!
//! Each command's arguments are parsed by the function named after it; carrying a command out
//! is the actor's, one file per command, because the grammar must stay a leaf the plug-in side
//! can use without reaching the actor.

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
    match words.as_slice() {
        [] => Err("empty command".into()),
        ["/todos", args @ ..] => todos(args),
        ["/help", args @ ..] => help(args),
        ["/todo", "approve", args @ ..] => approve(args),
        ["/todo", "reject", args @ ..] => reject(args),
        ["/todo", "skip", args @ ..] => skip(args),
        ["/todo", "add", args @ ..] => add(args),
        ["/todo", "update", args @ ..] => update(args),
        ["/checkpoint", "list", args @ ..] => checkpoint_list(args),
        ["/checkpoint", "restore", args @ ..] => checkpoint_restore(args),
        [first, ..] if !first.starts_with('/') => {
            Err(format!("not a command: {first:?} (commands start with /)"))
        }
        _ => Err("Unknown command".into()),
    }
}

/// Words joined back into one text, `None` when there are none.
fn rest(words: &[&str]) -> Option<String> {
    (!words.is_empty()).then(|| words.join(" "))
}

fn add(args: &[&str]) -> Result<Command, String> {
    match args {
        [agent] => Ok(Command::Add {
            agent: (*agent).to_owned(),
            after: vec![],
        }),
        [agent, "after", ids] => Ok(Command::Add {
            agent: (*agent).to_owned(),
            after: ids
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
        _ => Err("usage: /todo add <agent> [after <id>[,<id>]]".into()),
    }
}

fn approve(args: &[&str]) -> Result<Command, String> {
    match args {
        [] => Ok(Command::Approve { target: None }),
        [id] => Ok(Command::Approve {
            target: Some((*id).to_owned()),
        }),
        _ => Err("usage: /todo approve [<approval_id>|<todo_id>|all]".into()),
    }
}

fn checkpoint_list(args: &[&str]) -> Result<Command, String> {
    match args {
        [] => Ok(Command::CheckpointList),
        _ => Err("usage: /checkpoint list".into()),
    }
}

fn checkpoint_restore(args: &[&str]) -> Result<Command, String> {
    match args {
        [id] => Ok(Command::CheckpointRestore {
            checkpoint: (*id).to_owned(),
        }),
        _ => Err("usage: /checkpoint restore <checkpoint_id>".into()),
    }
}

fn help(args: &[&str]) -> Result<Command, String> {
    match args {
        [] => Ok(Command::Help),
        _ => Err("usage: /help".into()),
    }
}

fn reject(args: &[&str]) -> Result<Command, String> {
    Ok(Command::Reject {
        words: args.iter().map(|w| (*w).to_owned()).collect(),
    })
}

fn skip(args: &[&str]) -> Result<Command, String> {
    match args {
        [id, reason @ ..] => Ok(Command::Skip {
            todo: (*id).to_owned(),
            reason: rest(reason),
        }),
        [] => Err("usage: /todo skip <todo_id> [reason]".into()),
    }
}

fn todos(args: &[&str]) -> Result<Command, String> {
    match args {
        [] => Ok(Command::Todos),
        _ => Err("usage: /todos".into()),
    }
}

fn update(args: &[&str]) -> Result<Command, String> {
    match args {
        [id, status] => Ok(Command::Update {
            todo: (*id).to_owned(),
            status: (*status).to_owned(),
        }),
        _ => Err("usage: /todo update <todo_id> <status>".into()),
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
            "/todos now",
            "/todo approve a b",
            "/todo skip",
            "/todo add",
            "/todo add x before y",
            "/todo update todo_001",
            "/checkpoint",
            "/checkpoint list all",
            "/checkpoint restore",
            "/frobnicate",
            "hello",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must not parse");
        }
        assert_eq!(parse("/frobnicate"), Err("Unknown command".into()));
        assert_eq!(
            parse("/todo skip"),
            Err("usage: /todo skip <todo_id> [reason]".into())
        );
    }
}

//! `chronicle sessions`, black-box: on a data directory and against the real `chronicle serve`
//! holding it, `sessions`, `sessions show` and `sessions delete` print the same, human and
//! `--json`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, StartRun};
use chronicle_schemas::{HitlMode, RunStatus, SessionId};
use serde_json::Value;

use crate::cli_inspect::{Run, ok, output};
use crate::durability::Serve;

const TOKEN: &str = "tok-sessions-12345678";
const WAIT: Duration = Duration::from_secs(30);
const FIRST: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const SECOND: &str = "강남구 아파트 시세 알려줘";

/// Three sessions of completed turns: `thread-a` and `thread-b` with two each, `thread-c` one.
fn fixture(data: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::open(data, Options::default()).unwrap();
        let engine = Engine::open(store, chronicle_realestate::settings())
            .await
            .unwrap();
        for (session, query) in [
            ("thread-a", FIRST),
            ("thread-a", SECOND),
            ("thread-b", SECOND),
            ("thread-b", FIRST),
            ("thread-c", FIRST),
        ] {
            let req = StartRun {
                query: query.into(),
                session_id: Some(SessionId::from(session)),
                hitl: Some(HitlMode::None),
                ..StartRun::default()
            };
            let run = engine.start_run(req).await.unwrap().run_id;
            let s = engine
                .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
                .await
                .unwrap();
            assert_eq!(s.supervisor.run_status, RunStatus::Completed);
        }
        engine.shutdown().await;
    });
}

/// The command against the server; no data directory is involved.
fn remote(serve: &Serve, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    cmd.args(args)
        .args(["--server", serve.api.base()])
        .env("NO_COLOR", "1")
        .env("CHRONICLE_API_TOKEN", TOKEN)
        .env("CHRONICLE_DATA", "/nonexistent")
        .env_remove("CHRONICLE_SERVER")
        .env_remove("CLICOLOR_FORCE");
    output(cmd.output().unwrap())
}

fn commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["sessions"],
        vec!["sessions", "--json"],
        vec!["sessions", "--user", "nobody"],
        vec!["sessions", "show", "thread-a"],
        vec!["sessions", "show", "thread-a", "--json"],
    ]
}

#[test]
fn sessions_print_the_same_on_a_directory_and_against_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    fixture(&data);
    let embedded: Vec<String> = commands().iter().map(|c| ok(&data, c)).collect();
    let listed = &embedded[0];
    let order: Vec<&str> = listed
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(order, ["thread-c", "thread-b", "thread-a"], "{listed}");
    assert!(
        listed.contains(FIRST) && listed.contains("completed"),
        "{listed}"
    );
    assert_eq!(embedded[2], "no sessions\n");
    let line: Value = serde_json::from_str(&embedded[4]).unwrap();
    assert_eq!(line["type"], "session");
    let shown = &line["data"];
    assert_eq!(shown["turns"].as_array().unwrap().len(), 2, "{shown}");
    assert_eq!(shown["session"]["title"], FIRST);

    let scratch = tempfile::tempdir().unwrap();
    let serve = Serve::start_with(&data, &[], &scratch.path().join("serve.log"), Some(TOKEN));
    for (args, want) in commands().iter().zip(&embedded) {
        let got = remote(&serve, args);
        assert_eq!(got.code, 0, "{args:?}: {}", got.stderr);
        assert_eq!(&got.stdout, want, "{args:?}");
    }
    let missing = remote(&serve, &["sessions", "show", "nope"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);

    // A delete against the server, then one on the directory: the same report.
    let deleted = remote(&serve, &["sessions", "delete", "thread-b"]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    assert_eq!(
        deleted.stdout,
        "deleted session thread-b: 2 run(s) end with a SessionDeleted event (0 cancelled first); the events stay in the log\n"
    );
    let again = remote(&serve, &["sessions", "delete", "thread-b"]);
    assert_eq!(again.code, 2, "{}", again.stdout);
    let after = remote(&serve, &["sessions"]);
    assert!(!after.stdout.contains("thread-b"), "{}", after.stdout);
    drop(serve);

    let deleted = ok(&data, &["sessions", "delete", "thread-c", "--json"]);
    let row: Value = serde_json::from_str(&deleted).unwrap();
    assert_eq!(row["type"], "session_deleted");
    assert_eq!(row["data"]["session_id"], "thread-c");
    assert_eq!(row["data"]["runs"].as_array().unwrap().len(), 1);
    let left = ok(&data, &["sessions", "--json"]);
    assert_eq!(left.lines().count(), 1, "{left}");
    assert!(left.contains("thread-a"));
    // The tombstoned runs are still in the log, and it verifies.
    assert!(ok(&data, &["verify"]).contains("OK"));
}

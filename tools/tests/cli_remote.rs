//! The read commands against the real `chronicle serve`: `runs`, `log`, `replay` and
//! `checkpoints` print exactly what they print on the data directory itself, human and `--json`,
//! once the server holds the directory (and its lock). The token comes from
//! `CHRONICLE_API_TOKEN`, the server from `--server` or `CHRONICLE_SERVER`. (`serve` starts with a
//! token: `chronicle serve` is ready once it listens.)

use std::io::{Read, Write};
use std::process::Command;

use serde_json::Value;

use crate::cli_inspect::{Fixture, Run, chronicle, fixture, ok, output};
use crate::cli_run::output as with_input;
use crate::durability::Serve;

const TOKEN: &str = "tok-remote-12345678";

/// The command against the server, named by `via`; no data directory is involved.
fn read(serve: &Serve, args: &[&str], via: Via, stdin: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("CHRONICLE_API_TOKEN", TOKEN)
        .env("CHRONICLE_DATA", "/nonexistent")
        .env_remove("CLICOLOR_FORCE");
    match via {
        Via::Flag => {
            cmd.args(["--server", serve.api.base()])
                .env_remove("CHRONICLE_SERVER");
        }
        Via::Env => {
            cmd.env("CHRONICLE_SERVER", serve.api.base());
        }
    }
    output(with_input(cmd, stdin))
}

#[derive(Clone, Copy, Debug)]
enum Via {
    Flag,
    Env,
}

/// The read commands of the comparison, each human and `--json`.
fn commands(f: &Fixture) -> Vec<Vec<String>> {
    let run = f.run.to_string();
    let on_branch = f.second_approval_seq.to_string();
    let abandoned = (f.restore_seq - 1).to_string();
    let mut base: Vec<Vec<String>> = vec![
        vec!["runs".into()],
        vec!["runs".into(), "--status".into(), "completed".into()],
        vec!["log".into(), run.clone()],
        vec!["log".into(), run.clone(), "--all-branches".into()],
        vec![
            "replay".into(),
            run.clone(),
            "--to".into(),
            on_branch.clone(),
        ],
        vec![
            "replay".into(),
            run.clone(),
            "--to".into(),
            abandoned.clone(),
        ],
        vec!["replay".into(), run.clone()],
        vec![
            "replay".into(),
            run.clone(),
            "--diff".into(),
            "0".into(),
            f.last_seq.to_string(),
        ],
        vec![
            "replay".into(),
            run.clone(),
            "--diff".into(),
            on_branch,
            abandoned,
        ],
        vec!["checkpoints".into(), run],
    ];
    let json: Vec<Vec<String>> = base
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.push("--json".into());
            c
        })
        .collect();
    base.extend(json);
    base
}

#[test]
fn read_commands_print_the_same_against_a_server() {
    let f = fixture();
    let commands = commands(&f);
    let step_script = format!("n\nn 3\np\nc cp_004\ng {}\nt\ns\ne\nq\n", f.restore_seq);
    let step = |json: bool| {
        let mut args = vec!["replay".to_owned(), f.run.to_string(), "--step".to_owned()];
        if json {
            args.push("--json".into());
        }
        args
    };
    let embedded: Vec<String> = commands
        .iter()
        .map(|c| ok(&f.data, &c.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect();
    let embedded_steps: Vec<Run> = [false, true]
        .map(|json| {
            let args = step(json);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            output(with_input(chronicle(&f.data, &args), &step_script))
        })
        .into();

    let scratch = tempfile::tempdir().unwrap();
    let serve = Serve::start_with(&f.data, &[], &scratch.path().join("serve.log"), Some(TOKEN));
    // The server holds the directory now: the embedded commands say to use --server, which works.
    let locked = output(chronicle(&f.data, &["runs"]).output().unwrap());
    assert_eq!(locked.code, 2);
    assert!(
        locked.stderr.contains("or use --server URL"),
        "{}",
        locked.stderr
    );

    for (i, (args, want)) in commands.iter().zip(&embedded).enumerate() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Every other command names the server through the environment.
        let via = if i % 2 == 0 { Via::Flag } else { Via::Env };
        let got = read(&serve, &args, via, "");
        assert_eq!(got.code, 0, "{args:?} via {via:?}: {}", got.stderr);
        assert!(!want.is_empty(), "{args:?} printed nothing");
        assert_eq!(&got.stdout, want, "{args:?} via {via:?}");
    }
    for (json, want) in [false, true].into_iter().zip(&embedded_steps) {
        let args = step(json);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let got = read(&serve, &args, Via::Flag, &step_script);
        assert_eq!(got.code, 0, "{args:?}: {}", got.stderr);
        assert_eq!(got.stdout, want.stdout, "{args:?}");
        assert_eq!(got.stderr, want.stderr, "{args:?}");
    }

    // The console's diff page shows the TODO transitions `replay --diff --json` gives: one diff,
    // two surfaces.
    let run = f.run.to_string();
    for (from, to) in [
        (f.second_approval_seq, f.last_seq),
        (f.second_approval_seq, f.restore_seq - 1),
    ] {
        let (from, to) = (from.to_string(), to.to_string());
        let cli = read(
            &serve,
            &["replay", &run, "--diff", &from, &to, "--json"],
            Via::Flag,
            "",
        );
        assert_eq!(cli.code, 0, "{}", cli.stderr);
        let v: Value = serde_json::from_str(cli.stdout.trim()).unwrap();
        let want: Vec<String> = v["data"]["todos_changed"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t.get("status").is_some())
            .map(|t| {
                let s = |k: &str| t["status"][k].as_str().unwrap().to_owned();
                format!(
                    "{} {} {}",
                    t["todo_id"].as_str().unwrap(),
                    s("from"),
                    s("to")
                )
            })
            .collect();
        let page = http_get(
            serve.port,
            &format!("/console/runs/{run}/diff?from={from}&to={to}"),
        );
        let got: Vec<String> = page
            .split(" data-todo=\"")
            .skip(1)
            .map(|s| {
                let attr = |k: &str| {
                    s.split(k)
                        .nth(1)
                        .unwrap()
                        .split('"')
                        .next()
                        .unwrap()
                        .to_owned()
                };
                format!(
                    "{} {} {}",
                    s.split('"').next().unwrap(),
                    attr("data-from=\""),
                    attr("data-to=\"")
                )
            })
            .collect();
        assert!(!want.is_empty(), "the diff {from}..{to} changes TODOs");
        assert_eq!(got, want, "the diff {from}..{to}");
    }

    // Errors against a server are one line, as on a directory.
    let unknown = "0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192";
    for args in [
        vec!["replay", unknown, "--to", "1"],
        vec!["checkpoints", unknown],
        vec!["runs", "--session", "nobody", "--status", "failed"],
    ] {
        let r = read(&serve, &args, Via::Flag, "");
        if args[0] == "runs" {
            assert_eq!(
                (r.code, r.stdout.as_str()),
                (0, "no runs\n"),
                "{}",
                r.stderr
            );
            continue;
        }
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("not found (HTTP 404)"),
            "{args:?}: {}",
            r.stderr
        );
    }
    let r = read(
        &serve,
        &["replay", &f.run.to_string(), "--to", "99999"],
        Via::Flag,
        "",
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("seq 99999 is beyond"), "{}", r.stderr);
    // `verify` needs the directory itself, and says so instead of pointing at --server.
    let r = output(chronicle(&f.data, &["verify"]).output().unwrap());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("in use by a running server") && !r.stderr.contains("--server"),
        "{}",
        r.stderr
    );
}

#[test]
fn read_commands_document_server() {
    for cmd in ["runs", "log", "replay", "checkpoints", "restore"] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_chronicle"));
        let out = c
            .args([cmd, "--help"])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            help.contains("--server <URL>") && help.contains("CHRONICLE_SERVER"),
            "{cmd}: {help}"
        );
    }
}

/// A page of the server's console, read with its token over plain HTTP/1.1.
fn http_get(port: u16, path: &str) -> String {
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{path}: {}",
        answer.lines().next().unwrap_or_default()
    );
    answer
}

//! `chronicle serve --agents` with `[[mcp_server]]` tables, black-box: a bad entry stops the start
//! with the server and the reason named, and a good one's process is reaped when the server
//! stops. The server is the MCP tests' (`tests/mcp/server.py`, in the venv `make data-venv`
//! makes).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    let p = repo().join("target/data-venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `make data-venv`",
        p.display()
    );
    p
}

/// The agents file: server `t` (its process marked by `tag` on its command line) and an llm
/// agent that may call its tools.
fn config(dir: &Path, command: &str, tag: &str) -> PathBuf {
    let path = dir.join("agents.toml");
    let server = repo().join("tests/mcp/server.py");
    let text = format!(
        "[[mcp_server]]\nname = \"t\"\ncommand = {command:?}\nargs = [{server:?}, \"stdio\", {tag:?}]\n\n\
         [[agent]]\nname = \"operator\"\nkind = \"llm\"\nsystem_prompt = \"Use the tools.\"\ntools = [\"t_*\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(dir: &Path, agents: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronicle"));
    cmd.args([
        "serve",
        "--domain",
        "generic",
        "--addr",
        "127.0.0.1:0",
        "--agents",
    ])
    .arg(agents)
    .arg("--data")
    .arg(dir.join("data"))
    .env_remove("CHRONICLE_LLM_BASE_URL")
    .env_remove("CHRONICLE_LLM_API_KEY")
    .env_remove("OPENAI_API_KEY");
    cmd
}

/// The process whose command line holds `tag`.
fn tagged(tag: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&cmdline)
            .contains(tag)
            .then_some(pid)
    })
}

#[test]
fn a_bad_mcp_server_stops_serve_at_start_with_its_name_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let agents = config(dir.path(), "/no/such/mcp-server", "unused");
    let out = serve(dir.path(), &agents).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcp_server `t`: cannot start: command \"/no/such/mcp-server\" not found"),
        "{stderr}"
    );
}

#[test]
fn serve_reaps_its_mcp_servers_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("chronicle-mcp-tag-{}", std::process::id());
    let agents = config(dir.path(), python().to_str().unwrap(), &tag);
    let log = dir.path().join("serve.log");
    let mut server = serve(dir.path(), &agents)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Listening: the MCP server started before, and SIGTERM is now a clean stop.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("chronicle is listening")
    {
        assert!(Instant::now() < deadline, "serve never listened");
        assert!(server.try_wait().unwrap().is_none(), "serve stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = tagged(&tag).expect("the MCP server runs");
    let serve_pid = rustix::process::Pid::from_child(&server);
    rustix::process::kill_process(serve_pid, rustix::process::Signal::TERM).unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the MCP server's process {pid} was reaped with the server"
    );
}

//! The real `chronicle serve` holding 5,000 idle SSE streams: the memory it allocates (resident
//! anonymous memory) stays under 100 MB, because each stream costs a fixed few KiB (no buffer
//! grows while nothing is sent). Its code pages are left out: this is the debug build, whose
//! code alone is about 25 MB resident (the release build's whole `VmRSS` with the 5,000 streams
//! is about 70 MB).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::durability::Serve;

const STREAMS: usize = 5000;
const RSS_BYTES_MAX: u64 = 100 * 1024 * 1024;

/// Raises this process's soft limit on open files to the hard one: the test holds a socket per
/// stream (the server raises its own at start).
fn raise_open_files_limit(needed: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised).unwrap();
    let open_files_max = limit.maximum.unwrap_or(u64::MAX);
    assert!(
        open_files_max >= needed,
        "the hard limit on open files ({open_files_max}) is below the {needed} this test needs"
    );
}

/// A field of `/proc/<pid>/status` in kB, as bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
    kib * 1024
}

/// What the process allocated and holds resident: anonymous and shared memory (`RssAnon` +
/// `RssShmem`), without the pages of its executable and libraries (`RssFile`).
fn rss_bytes(pid: u32) -> u64 {
    status_bytes(pid, "RssAnon:") + status_bytes(pid, "RssShmem:")
}

/// Opens the all-runs stream and reads its response head (so the stream is open on the server).
fn open_stream(port: u16) -> TcpStream {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    tcp.write_all(
        format!("GET /api/v1/events HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tcp.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&head));
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tcp
}

#[test]
fn five_thousand_idle_sse_streams_stay_under_100_mb() {
    raise_open_files_limit(STREAMS as u64 + 256);
    let dir = tempfile::tempdir().unwrap();
    let caps = (STREAMS + 100).to_string();
    let flags = [
        "--connections-max",
        &caps,
        "--streams-max",
        &caps,
        "--streams-per-principal-max",
        &caps,
    ];
    let args: Vec<&OsStr> = flags.iter().map(OsStr::new).collect();
    let serve = Serve::start_with(
        &dir.path().join("data"),
        &args,
        &dir.path().join("serve.log"),
        None,
    );
    let idle = rss_bytes(serve.pid());
    let streams: Vec<TcpStream> = (0..STREAMS).map(|_| open_stream(serve.port)).collect();
    let rss = rss_bytes(serve.pid());
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "chronicle serve: allocated and resident {:.1} MiB idle, {:.1} MiB with {STREAMS} idle SSE streams ({:.1} KiB a stream); VmRSS with its code {:.1} MiB",
        mib(idle),
        mib(rss),
        (rss.saturating_sub(idle)) as f64 / 1024.0 / STREAMS as f64,
        mib(status_bytes(serve.pid(), "VmRSS:")),
    );
    assert!(
        rss < RSS_BYTES_MAX,
        "{:.1} MiB allocated and resident with {STREAMS} streams; the bound is {:.0} MiB\n{}",
        mib(rss),
        mib(RSS_BYTES_MAX),
        serve.log_text()
    );
    drop(streams);
}

//! Helpers shared by the integration tests.

use chronicle_engine::store::{Options, Store};
use chronicle_schemas::{Event, RunId, SessionId};

pub fn run_started(session: &str) -> Event {
    Event::RunStarted {
        session_id: SessionId::from(session),
        user_id: None,
        request_id: "req".into(),
        query: "강남구 아파트 시세 조회".into(),
        config: Default::default(),
        parent: None,
    }
}

pub fn note(i: u64) -> Event {
    Event::Reasoning {
        message: format!("step {i}"),
    }
}

pub fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, Options::default()).expect("store opens")
}

pub fn run(i: u128) -> RunId {
    RunId::from_u128(0x5EED_0000 + i)
}

pub use chronicle_testkit::tmpfs::Tmpfs;

//! Where a store lives, as the commands name it: `sled:DIR` (a data directory) or a PostgreSQL
//! URL (`postgres://…`, `postgresql://…`).

use std::path::PathBuf;

use crate::{Create, Options, Result, Store};

#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// The embedded sled store in this directory.
    Sled(PathBuf),
    /// A store on PostgreSQL, by its URL (see [`crate::Target::parse`]).
    Postgres(String),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Shown without a password.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sled(dir) => write!(f, "sled:{}", dir.display()),
            Location::Postgres(url) => match crate::Target::parse(url) {
                Ok(t) => f.write_str(&t.shown),
                Err(_) => f.write_str("postgres://(unparsable URL)"),
            },
        }
    }
}

impl std::str::FromStr for Location {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            crate::Target::parse(s).map_err(|e| e.to_string())?;
            return Ok(Location::Postgres(s.to_owned()));
        }
        if let Some(dir) = s.strip_prefix("sled:")
            && !dir.is_empty()
        {
            return Ok(Location::Sled(PathBuf::from(dir)));
        }
        Err(format!(
            "a store is `sled:DIR` or a PostgreSQL URL `postgres://user@host/database`, got {s:?}"
        ))
    }
}

impl Location {
    /// Opens the store here; `create` says whether a PostgreSQL store's schema may be made (a
    /// sled directory is created when missing, as `Store::open` does).
    pub fn open(&self, opts: Options, create: Create) -> Result<Store> {
        match self {
            Location::Sled(dir) => Store::open(dir, opts),
            Location::Postgres(url) => Store::open_postgres(url, opts, create),
        }
    }
}

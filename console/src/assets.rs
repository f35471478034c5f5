//! The console's script and style sheet, built into the binary (nothing is fetched at run time),
//! each served under a name that carries a digest of its bytes so a browser may keep it forever.

use std::sync::LazyLock;

/// A file the pages load.
#[derive(Debug)]
pub struct Asset {
    /// The name it is served under: `console.<digest>.js`.
    pub name: String,
    pub bytes: &'static [u8],
    pub content_type: &'static str,
}

impl Asset {
    fn new(stem: &str, ext: &str, bytes: &'static [u8], content_type: &'static str) -> Self {
        let digest = blake3::hash(bytes).to_hex();
        Self {
            name: format!("{stem}.{}.{ext}", &digest[..16]),
            bytes,
            content_type,
        }
    }

    /// The URL path a page links it by.
    pub fn path(&self) -> String {
        format!("/console/assets/{}", self.name)
    }
}

pub static SCRIPT: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "console",
        "js",
        include_bytes!("../assets/console.js"),
        "text/javascript; charset=utf-8",
    )
});

pub static STYLE: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "console",
        "css",
        include_bytes!("../assets/console.css"),
        "text/css; charset=utf-8",
    )
});

/// The asset served under `name`, if any.
pub fn asset(name: &str) -> Option<&'static Asset> {
    [&*SCRIPT, &*STYLE].into_iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_digest_of_the_bytes() {
        assert!(SCRIPT.name.starts_with("console.") && SCRIPT.name.ends_with(".js"));
        assert_eq!(asset(&SCRIPT.name).unwrap().bytes, SCRIPT.bytes);
        assert_eq!(asset(&STYLE.name).unwrap().content_type, STYLE.content_type);
        assert!(asset("console.js").is_none());
        assert_ne!(SCRIPT.name, STYLE.name);
    }
}

//! Scratch directories of tests: made under the system's temporary directory, removed with everything in them when
//! dropped, so test runs leave nothing behind.

use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new empty directory named `hookflow-<what>-<unique id>`.
    pub fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hookflow-{what}-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

//! Where the embedded cluster's files live. Normally `<data-dir>/postgres`. A server started as root hands the
//! cluster to the `postgres` system user, who cannot enter a data directory under a private home (a fresh clone
//! in `/root`, mode 0700): then the cluster gets a unique directory of its own under `--embedded-cluster-dir`
//! (default `/var/lib/hookflow`), and `<data-dir>/postgres.location` remembers it. The data directory keeps the
//! master key, the lock and that pointer, so every later start and operator command finds the same cluster.

use crate::db::embedded::{self, EmbeddedError};
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The pointer's name inside the data directory.
pub const POINTER: &str = "postgres.location";

#[derive(Debug, thiserror::Error)]
pub enum ClusterHomeError {
    #[error(
        "{pointer} says the embedded cluster lives in {cluster}, which is gone. Restore that directory from your \
         backup, or remove {pointer} to start an empty cluster"
    )]
    Gone { pointer: PathBuf, cluster: PathBuf },
    #[error(
        "the `postgres` system user can enter neither the data directory {data_dir} nor {parent}, where the \
         embedded cluster would otherwise go. Choose a --data-dir it can reach (for example under /var/lib), give \
         the parents search permission (chmod o+x), set --embedded-cluster-dir to a directory it can enter, or use \
         --database-url"
    )]
    NowhereToGo { data_dir: PathBuf, parent: PathBuf },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> ClusterHomeError {
    move |source| ClusterHomeError::Io { context, source }
}

/// The directory the embedded cluster of `data_dir` uses, made (and remembered) when it must live elsewhere.
pub fn resolve(data_dir: &Path, relocate_under: &Path) -> Result<PathBuf, ClusterHomeError> {
    let pointer = data_dir.join(POINTER);
    if let Ok(text) = fs::read_to_string(&pointer) {
        let cluster = PathBuf::from(text.trim());
        if !cluster.is_dir() {
            return Err(ClusterHomeError::Gone { pointer, cluster });
        }
        return Ok(cluster);
    }
    let inside = data_dir.join("postgres");
    // An ordinary user runs the cluster itself; an existing cluster inside stays where it is.
    if !nix::unistd::geteuid().is_root() || inside.join("data").exists() || embedded::postgres_can_enter(data_dir)? {
        return Ok(inside);
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(relocate_under)
        .map_err(io(format!("creating {}", relocate_under.display())))?;
    if !embedded::postgres_can_enter(relocate_under)? {
        return Err(ClusterHomeError::NowhereToGo { data_dir: data_dir.to_owned(), parent: relocate_under.to_owned() });
    }
    let mut random = [0u8; 8];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut random);
    let cluster = relocate_under.join(format!("cluster-{}", hex::encode(random)));
    fs::DirBuilder::new().mode(0o700).create(&cluster).map_err(io(format!("creating {}", cluster.display())))?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&pointer)
        .map_err(io(format!("creating {}", pointer.display())))?;
    writeln!(file, "{}", cluster.display()).map_err(io(format!("writing {}", pointer.display())))?;
    file.sync_all().map_err(io(format!("writing {}", pointer.display())))?;
    tracing::info!(
        data_dir = %data_dir.display(), cluster = %cluster.display(),
        "the postgres user cannot enter the data directory; the embedded cluster lives in its own directory \
         (remembered in {POINTER})"
    );
    Ok(cluster)
}

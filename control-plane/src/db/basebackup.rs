//! Copies of the embedded cluster: `pg_basebackup` streams a running cluster with the WAL written meanwhile (so the
//! copy is consistent on its own), `pg_verifybackup` checks a copy against its manifest, and a copy is laid down as
//! a cluster's data directory, owned by the cluster's user. Blocking.

use crate::db::embedded::{EmbeddedCluster, EmbeddedError, SUPERUSER};
use std::fs;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::{Command, Stdio};

/// Bytes of a failing tool's messages kept in the error.
const MESSAGES_KEPT: usize = 2_000;

fn io(context: String) -> impl FnOnce(std::io::Error) -> EmbeddedError {
    move |source| EmbeddedError::Io { context, source }
}

/// Streams the running `cluster` into `target` (absent or empty) as plain files, its WAL streamed alongside, after a
/// fast checkpoint. pg_basebackup's progress and messages go to standard error as it writes them.
pub fn stream(cluster: &EmbeddedCluster, target: &Path) -> Result<(), EmbeddedError> {
    let program = cluster.bindir().join("pg_basebackup");
    let status = Command::new(&program)
        .arg("--pgdata")
        .arg(target)
        .args(["--format=plain", "--wal-method=stream", "--checkpoint=fast", "--progress", "--no-password"])
        .arg("--label=hookflow-server backup")
        .arg("--host")
        .arg(cluster.socket_dir())
        .args(["--port", "5432", "--username", SUPERUSER])
        .env("PGPASSWORD", cluster.password())
        .env_remove("PGPASSFILE")
        .env_remove("PGSERVICE")
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .map_err(io(format!("running {}", program.display())))?;
    if !status.success() {
        return Err(EmbeddedError::Command {
            what: "pg_basebackup".into(),
            detail: format!("{status}; its messages are above"),
        });
    }
    Ok(())
}

/// Checks the copy in `copy` against its `backup_manifest` (every file's size and checksum, and the WAL it needs).
pub fn verify(bindir: &Path, copy: &Path) -> Result<(), EmbeddedError> {
    let program = bindir.join("pg_verifybackup");
    let out = Command::new(&program)
        .arg("--quiet")
        .arg(copy)
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("running {}", program.display())))?;
    if !out.status.success() {
        let messages = String::from_utf8_lossy(&out.stderr);
        let messages = messages.trim();
        let start = messages.len().saturating_sub(MESSAGES_KEPT);
        let start = (start..messages.len()).find(|&i| messages.is_char_boundary(i)).unwrap_or(messages.len());
        return Err(EmbeddedError::Command { what: "pg_verifybackup".into(), detail: messages[start..].to_owned() });
    }
    Ok(())
}

/// What [`lay_down`] copied.
#[derive(Debug, Default, Clone, Copy)]
pub struct Copied {
    pub files: u64,
    pub bytes: u64,
}

/// Copies the tree `copy` to `data` (which must not exist): directories private (0700), files with their modes,
/// everything handed to `owner` when given. A link in the copy is refused (a plain base backup has none), so a
/// crafted backup never writes outside `data`. `progress` hears the bytes copied so far, after each file.
pub fn lay_down(
    copy: &Path,
    data: &Path,
    owner: Option<(u32, u32)>,
    progress: &mut dyn FnMut(Copied),
) -> Result<Copied, EmbeddedError> {
    let mut copied = Copied::default();
    let mut stack = vec![(copy.to_path_buf(), data.to_path_buf())];
    while let Some((from, to)) = stack.pop() {
        fs::DirBuilder::new().mode(0o700).create(&to).map_err(io(format!("creating {}", to.display())))?;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o700)).map_err(io(format!("chmod {}", to.display())))?;
        chown(&to, owner)?;
        for entry in fs::read_dir(&from).map_err(io(format!("reading {}", from.display())))? {
            let entry = entry.map_err(io(format!("reading {}", from.display())))?;
            let kind = entry.file_type().map_err(io(format!("reading {}", entry.path().display())))?;
            let target = to.join(entry.file_name());
            if kind.is_dir() {
                stack.push((entry.path(), target));
            } else if kind.is_file() {
                copied.bytes += fs::copy(entry.path(), &target).map_err(io(format!(
                    "copying {} to {}",
                    entry.path().display(),
                    target.display()
                )))?;
                copied.files += 1;
                chown(&target, owner)?;
                progress(copied);
            } else {
                return Err(EmbeddedError::Command {
                    what: "laying the copy down".into(),
                    detail: format!("{} is neither a file nor a directory", entry.path().display()),
                });
            }
        }
    }
    Ok(copied)
}

fn chown(path: &Path, owner: Option<(u32, u32)>) -> Result<(), EmbeddedError> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .map_err(io(format!("giving {} to the postgres user", path.display()))),
        None => Ok(()),
    }
}

//! The server's data directory: the exclusive lock that keeps two servers off one directory, and the master key.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::Rng as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Held for the life of a server; the OS releases it when the process dies, even by SIGKILL.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error(
        "another hookflow-server{pid} is using the data directory {dir}; stop it first, or give this one its own \
         --data-dir"
    )]
    Busy { dir: PathBuf, pid: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the master key in {0} is not 32 bytes of base64; restore it from your backup")]
    BadMasterKey(PathBuf),
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> DataDirError {
    move |source| DataDirError::Io { context, source }
}

/// Creates the directory when missing (mode 0700), and (new or not) keeps it private: nobody else may list or
/// write it. Search permission is left as it is (a cluster run by another user may need to pass through).
pub fn create(dir: &Path) -> Result<(), DataDirError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(format!("creating the data directory {}", dir.display())))?;
    let mode = fs::metadata(dir).map_err(io(format!("reading {}", dir.display())))?.permissions().mode();
    if mode & 0o066 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode((mode & 0o711) | 0o700))
            .map_err(io(format!("making the data directory {} private", dir.display())))?;
    }
    Ok(())
}

/// Takes the directory's lock without waiting; `Busy` names the pid holding it.
pub fn lock(dir: &Path) -> Result<DataDirLock, DataDirError> {
    let path = dir.join("hookflow.lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io(format!("opening {}", path.display())))?;
    if file.try_lock().is_err() {
        let mut pid = String::new();
        let _ = file.read_to_string(&mut pid);
        let pid = pid.trim();
        let pid = if pid.is_empty() { String::new() } else { format!(" (pid {pid})") };
        return Err(DataDirError::Busy { dir: dir.to_owned(), pid });
    }
    file.set_len(0).map_err(io(format!("writing {}", path.display())))?;
    file.rewind().map_err(io(format!("writing {}", path.display())))?;
    writeln!(file, "{}", std::process::id()).map_err(io(format!("writing {}", path.display())))?;
    Ok(DataDirLock { _file: file })
}

/// The 32-byte master key: the configured one, else the one in `<dir>/master.key`, generated (mode 0600) on first
/// use.
pub fn master_key(dir: &Path, configured: Option<&str>) -> Result<[u8; 32], DataDirError> {
    let path = dir.join("master.key");
    let decode = |text: &str, origin: PathBuf| -> Result<[u8; 32], DataDirError> {
        STANDARD
            .decode(text.trim())
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or(DataDirError::BadMasterKey(origin))
    };
    if let Some(text) = configured {
        return decode(text, PathBuf::from("HOOKFLOW_MASTER_KEY"));
    }
    match fs::read_to_string(&path) {
        Ok(text) => decode(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            rand::rng().fill_bytes(&mut key);
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(io(format!("creating {}", path.display())))?;
            writeln!(file, "{}", STANDARD.encode(key)).map_err(io(format!("writing {}", path.display())))?;
            file.sync_all().map_err(io(format!("writing {}", path.display())))?;
            Ok(key)
        }
        Err(e) => Err(io(format!("reading {}", path.display()))(e)),
    }
}

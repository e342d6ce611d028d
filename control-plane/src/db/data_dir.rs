//! The server's data directory: the exclusive lock that keeps two servers off one directory, and the master key.

use crate::crypto::KeyMaterial;
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

/// The master keyring as configured: the key that seals, the keys that still open, and the file they came from
/// (`None` when configured through flags or the environment).
#[derive(Debug, Clone)]
pub struct MasterKeys {
    pub current: KeyMaterial,
    pub previous: Vec<KeyMaterial>,
    pub file: Option<PathBuf>,
}

impl MasterKeys {
    pub fn keyring(&self) -> crate::crypto::MasterKey {
        crate::crypto::MasterKey::with_previous(self.current, self.previous.clone())
    }
}

/// How a key used through subkeys (see `crypto`) is written: `v2:` before its base64.
const DERIVED_PREFIX: &str = "v2:";

fn decode(text: &str, origin: &Path) -> Result<KeyMaterial, DataDirError> {
    let text = text.trim();
    let (derived, text) = match text.strip_prefix(DERIVED_PREFIX) {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    STANDARD
        .decode(text)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .map(|bytes| KeyMaterial { bytes, derived })
        .ok_or_else(|| DataDirError::BadMasterKey(origin.to_owned()))
}

fn encode(key: &KeyMaterial) -> String {
    let base64 = STANDARD.encode(key.bytes);
    if key.derived { format!("{DERIVED_PREFIX}{base64}") } else { base64 }
}

/// A new random key: used through subkeys.
fn new_key() -> KeyMaterial {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    KeyMaterial::derived(bytes)
}

/// The master keys: the configured ones (`--master-key`, `--previous-master-keys`), else `<dir>/master.key`
/// (its first line seals, later lines still open), generated with one key (mode 0600) on first use.
pub fn master_keys(dir: &Path, configured: Option<&str>, previous: &[String]) -> Result<MasterKeys, DataDirError> {
    if let Some(text) = configured {
        let origin = Path::new("HOOKFLOW_MASTER_KEY");
        let previous =
            previous.iter().map(|k| decode(k, Path::new("HOOKFLOW_PREVIOUS_MASTER_KEYS"))).collect::<Result<_, _>>()?;
        return Ok(MasterKeys { current: decode(text, origin)?, previous, file: None });
    }
    let path = dir.join("master.key");
    match read_key_file(&path) {
        Ok(keys) => Ok(keys),
        Err(DataDirError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            let key = new_key();
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(io(format!("creating {}", path.display())))?;
            writeln!(file, "{}", encode(&key)).map_err(io(format!("writing {}", path.display())))?;
            file.sync_all().map_err(io(format!("writing {}", path.display())))?;
            Ok(MasterKeys { current: key, previous: Vec::new(), file: Some(path) })
        }
        Err(e) => Err(e),
    }
}

/// Reads a key file: the current key on the first line, previous keys on the following ones.
pub fn read_key_file(path: &Path) -> Result<MasterKeys, DataDirError> {
    let text = fs::read_to_string(path).map_err(io(format!("reading {}", path.display())))?;
    let mut keys = text.lines().filter(|l| !l.trim().is_empty()).map(|l| decode(l, path));
    let current = keys.next().ok_or_else(|| DataDirError::BadMasterKey(path.to_owned()))??;
    Ok(MasterKeys { current, previous: keys.collect::<Result<_, _>>()?, file: Some(path.to_owned()) })
}

/// Puts a new random key first in the key file; the keys it had stay after it, so they still open their values.
pub fn add_new_key(path: &Path) -> Result<MasterKeys, DataDirError> {
    let old = read_key_file(path)?;
    let key = new_key();
    let mut previous = vec![old.current];
    previous.extend(old.previous);
    let keys = MasterKeys { current: key, previous, file: Some(path.to_owned()) };
    write_key_file(path, &keys)?;
    Ok(keys)
}

/// Drops every key but the current one from the key file (after a rotation left no value under them).
pub fn retire_previous_keys(path: &Path) -> Result<(), DataDirError> {
    let keys = read_key_file(path)?;
    write_key_file(path, &MasterKeys { previous: Vec::new(), ..keys })
}

/// Replaces the key file atomically (a new file, mode 0600, synced, renamed over it): current key first.
pub fn write_key_file(path: &Path, keys: &MasterKeys) -> Result<(), DataDirError> {
    let lines: Vec<String> = std::iter::once(&keys.current).chain(&keys.previous).map(encode).collect();
    let next = path.with_extension("key.new");
    // A file (or a link) left at `next`, by a crash or by someone who can write the directory, is removed, never
    // written through: the key goes only into a file made here, readable by this user alone.
    match fs::remove_file(&next) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io(format!("removing {}", next.display()))(e));
        }
        _ => {}
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&next)
        .map_err(io(format!("creating {}", next.display())))?;
    writeln!(file, "{}", lines.join("\n")).map_err(io(format!("writing {}", next.display())))?;
    file.sync_all().map_err(io(format!("writing {}", next.display())))?;
    fs::rename(&next, path).map_err(io(format!("replacing {}", path.display())))
}

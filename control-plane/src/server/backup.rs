//! `hookflow-server backup --to DIR [--include-master-key]` and `hookflow-server restore --from DIR`: a consistent
//! online copy of the embedded cluster (pg_basebackup, WAL included, checked by pg_verifybackup) with a note of
//! where the master key lives (the key itself only when asked), and that copy laid down as a fresh data directory,
//! started once before the command says it is done.

use crate::db::basebackup::{self, Copied};
use crate::db::cluster_home;
use crate::db::data_dir::{self, MasterKeys};
use crate::db::embedded::{ClusterOptions, Durability, EmbeddedCluster};
use crate::db::storage::BoxError;
use crate::server::config::{ServeArgs, StorageArgs};
use serde::{Deserialize, Serialize};
use sqlx::ConnectOptions as _;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The file that makes a directory a hookflow backup; written last, so a backup cut short has none.
const MANIFEST: &str = "hookflow-backup.json";
const FORMAT: &str = "hookflow-backup/1";
/// The cluster's files (pg_basebackup's plain format, `backup_manifest` included).
const CLUSTER: &str = "postgres";
/// The cluster superuser's password, which the restored cluster keeps.
const CLUSTER_PASSWORD: &str = "postgres.password";
/// The master key file, with `--include-master-key` only.
const MASTER_KEY: &str = "master.key";
/// Where the RUNBOOK's recipe for external databases is.
const RUNBOOK: &str = "docs/RUNBOOK.md, section \"Backup and restore\"";

/// What `hookflow-backup.json` says.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    made_at: chrono::DateTime<chrono::Utc>,
    made_by: String,
    /// The last migration applied to the copied database.
    schema_version: i64,
    /// The PostgreSQL major version of the copy (its `PG_VERSION`).
    postgresql: String,
    master_key: MasterKeyNote,
}

#[derive(Debug, Serialize, Deserialize)]
struct MasterKeyNote {
    /// Whether `master.key` is in the backup.
    included: bool,
    /// Where the key lived when the backup was made.
    location: String,
}

/// `hookflow-server backup`.
pub async fn backup(storage: &StorageArgs, serve: &ServeArgs, to: &Path, include_key: bool) -> Result<(), BoxError> {
    if storage.database_url().is_some() {
        return Err(format!(
            "backup copies the embedded cluster, and this server uses an external PostgreSQL (--database-url): back \
             that database up with its own tools; {RUNBOOK} has a tested pgBackRest recipe (full backup, WAL \
             archiving, point-in-time restore)"
        )
        .into());
    }
    let created = prepare_target(to)?;
    let result = write_backup(storage, serve, to, include_key).await;
    if result.is_err() {
        clear(to, created);
    }
    result
}

async fn write_backup(storage: &StorageArgs, serve: &ServeArgs, to: &Path, include_key: bool) -> Result<(), BoxError> {
    let root = existing_cluster(&storage.data_dir)?;
    let options = cluster_options(root.clone(), storage);
    // No server holds the data directory: start its cluster for the copy, and stop it after.
    let lock = data_dir::lock(&storage.data_dir).ok();
    let started = match &lock {
        Some(_) => {
            let options = options.clone();
            let cluster = tokio::task::spawn_blocking(move || EmbeddedCluster::start(&options)).await??;
            (!cluster.adopted).then_some(cluster)
        }
        None => None,
    };
    let result = copy_cluster(&options, storage, serve, to, include_key).await;
    if let Some(cluster) = started {
        tokio::task::spawn_blocking(move || cluster.stop()).await??;
    }
    drop(lock);
    result
}

async fn copy_cluster(
    options: &ClusterOptions,
    storage: &StorageArgs,
    serve: &ServeArgs,
    to: &Path,
    include_key: bool,
) -> Result<(), BoxError> {
    let cluster = EmbeddedCluster::locate(options)?;
    // A cluster started by an earlier release lets no replication connection in yet.
    let allowed = cluster.clone();
    tokio::task::spawn_blocking(move || allowed.write_hba()).await??;
    let schema_version = schema_version(&cluster).await?;
    let key = master_key(storage, serve)?;
    if include_key && key.is_none() {
        return Err(format!(
            "--include-master-key: there is no master key yet ({} is made at the server's first start)",
            storage.data_dir.join(MASTER_KEY).display()
        )
        .into());
    }
    println!(
        "backing up the embedded cluster in {} to {} (pg_basebackup: WAL streamed along, fast checkpoint)",
        options.root.display(),
        to.display()
    );
    let started = std::time::Instant::now();
    let copy = to.join(CLUSTER);
    let (bindir, streamed) = (cluster.bindir().to_owned(), cluster.clone());
    let target = copy.clone();
    tokio::task::spawn_blocking(move || basebackup::stream(&streamed, &target)).await??;
    println!(
        "copied in {:.1} s; checking the copy against its manifest (pg_verifybackup)",
        started.elapsed().as_secs_f64()
    );
    let checked = copy.clone();
    tokio::task::spawn_blocking(move || basebackup::verify(&bindir, &checked)).await??;
    write_private(&to.join(CLUSTER_PASSWORD), cluster.password())?;
    let location = key.as_ref().map_or_else(
        || "none yet: the server makes <data-dir>/master.key at its first start".to_owned(),
        |(_, location)| location.clone(),
    );
    if include_key && let Some((keys, _)) = &key {
        data_dir::write_key_file(&to.join(MASTER_KEY), keys)?;
    }
    let postgresql = fs::read_to_string(copy.join("PG_VERSION"))?.trim().to_owned();
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        made_at: chrono::Utc::now(),
        made_by: format!("hookflow-server {}", env!("CARGO_PKG_VERSION")),
        schema_version,
        postgresql,
        master_key: MasterKeyNote { included: include_key, location: location.clone() },
    };
    write_private(&to.join(MANIFEST), &serde_json::to_string_pretty(&manifest)?)?;
    println!(
        "backup complete in {:.1} s: {} (PostgreSQL {}, schema version {schema_version})",
        started.elapsed().as_secs_f64(),
        to.display(),
        manifest.postgresql
    );
    if include_key {
        println!("  master key: included ({}); this backup opens every secret: keep it as safe as the key", MASTER_KEY);
    } else {
        println!("  master key: not included; it lives in {location}: back it up apart from this directory");
    }
    println!("restore with: hookflow-server --data-dir <new directory> restore --from {}", to.display());
    Ok(())
}

/// `hookflow-server restore`.
pub async fn restore(storage: &StorageArgs, from: &Path) -> Result<(), BoxError> {
    if storage.database_url().is_some() {
        return Err(format!(
            "restore lays down an embedded cluster; with an external PostgreSQL (--database-url) restore that \
             database with its own tools ({RUNBOOK})"
        )
        .into());
    }
    let manifest = read_manifest(from)?;
    let data = &storage.data_dir;
    if !is_empty_or_absent(data)? {
        return Err(format!(
            "the data directory {} is not empty: restore makes a fresh one; name a new --data-dir (or move this \
             one away first)",
            data.display()
        )
        .into());
    }
    let created = !data.exists();
    data_dir::create(data)?;
    let result = lay_down(storage, from, &manifest).await;
    if result.is_err() {
        clear(data, created);
    }
    result
}

async fn lay_down(storage: &StorageArgs, from: &Path, manifest: &Manifest) -> Result<(), BoxError> {
    let data = &storage.data_dir;
    let _lock = data_dir::lock(data)?;
    println!(
        "restoring the backup of {} (schema version {}) into {}",
        manifest.made_at,
        manifest.schema_version,
        data.display()
    );
    let bindir = storage.pg_bindir.clone().or_else(crate::db::embedded::find_bindir);
    let bindir = bindir.ok_or(crate::db::embedded::EmbeddedError::BinariesNotFound)?;
    let copy = from.join(CLUSTER);
    let checked = (bindir.clone(), copy.clone());
    tokio::task::spawn_blocking(move || basebackup::verify(&checked.0, &checked.1)).await??;
    println!("  the copy matches its manifest (pg_verifybackup)");
    if nix::unistd::geteuid().is_root() {
        // The cluster, owned by the postgres user, lives inside: that user must be able to pass through.
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(data, fs::Permissions::from_mode(0o711))?;
    }
    let root = cluster_home::resolve(data, &storage.embedded_cluster_dir)?;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&root)?;
    let password = fs::read_to_string(from.join(CLUSTER_PASSWORD))?;
    write_private(&root.join("password"), password.trim())?;
    let options = ClusterOptions { bindir: Some(bindir), ..cluster_options(root.clone(), storage) };
    let owner = EmbeddedCluster::locate(&options)?.owner();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&root, Some(uid), Some(gid))?;
        std::os::unix::fs::chown(root.join("password"), Some(uid), Some(gid))?;
    }
    let target = root.join("data");
    let copied = tokio::task::spawn_blocking(move || {
        let mut next_report = REPORT_EVERY;
        basebackup::lay_down(&copy, &target, owner, &mut |so_far: Copied| {
            if so_far.bytes >= next_report {
                println!("  {} MiB copied", so_far.bytes >> 20);
                next_report = so_far.bytes + REPORT_EVERY;
            }
        })
    })
    .await??;
    println!("  laid down {} files, {} MiB, in {}", copied.files, copied.bytes >> 20, root.join("data").display());
    println!("  starting the restored cluster (PostgreSQL replays the WAL taken with the copy)");
    let start = options.clone();
    let cluster = tokio::task::spawn_blocking(move || EmbeddedCluster::start(&start)).await??;
    let checked = schema_version(&cluster).await;
    tokio::task::spawn_blocking(move || cluster.stop()).await??;
    let schema_version = checked?;
    if schema_version != manifest.schema_version {
        return Err(format!(
            "the restored database is at schema version {schema_version}, the backup says {}",
            manifest.schema_version
        )
        .into());
    }
    println!("  the restored cluster starts and its database is at schema version {schema_version}");
    if manifest.master_key.included {
        let keys = data_dir::read_key_file(&from.join(MASTER_KEY))?;
        data_dir::write_key_file(&data.join(MASTER_KEY), &keys)?;
        println!("  master key put back at {}", data.join(MASTER_KEY).display());
    } else {
        println!(
            "  the backup holds no master key (it lived in {}): put it at {} or give --master-key before starting, \
             or the secrets stay sealed",
            manifest.master_key.location,
            data.join(MASTER_KEY).display()
        );
    }
    println!("restored; start the server with: hookflow-server --data-dir {}", data.display());
    Ok(())
}

/// Bytes between two progress lines of a restore's copy.
const REPORT_EVERY: u64 = 256 << 20;

/// The backup in `from`, refused with a clear message when it is none.
fn read_manifest(from: &Path) -> Result<Manifest, BoxError> {
    let not_a_backup = |why: String| -> BoxError {
        format!("{} is not a hookflow backup ({why}); `hookflow-server backup --to DIR` makes one", from.display())
            .into()
    };
    let text = fs::read_to_string(from.join(MANIFEST)).map_err(|e| not_a_backup(format!("{MANIFEST}: {e}")))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| not_a_backup(format!("{MANIFEST} is not readable: {e}")))?;
    if manifest.format != FORMAT {
        return Err(not_a_backup(format!("its format is {:?}, this server reads {FORMAT:?}", manifest.format)));
    }
    for needed in [format!("{CLUSTER}/PG_VERSION"), format!("{CLUSTER}/backup_manifest"), CLUSTER_PASSWORD.to_owned()] {
        if !from.join(&needed).is_file() {
            return Err(not_a_backup(format!("{needed} is missing")));
        }
    }
    if manifest.master_key.included && !from.join(MASTER_KEY).is_file() {
        return Err(not_a_backup(format!("it says it holds the master key, and {MASTER_KEY} is missing")));
    }
    Ok(manifest)
}

/// The directory of the data directory's embedded cluster, which must exist.
fn existing_cluster(data_dir: &Path) -> Result<PathBuf, BoxError> {
    let pointer = data_dir.join(cluster_home::POINTER);
    let root = match fs::read_to_string(&pointer) {
        Ok(text) => PathBuf::from(text.trim()),
        Err(_) => data_dir.join("postgres"),
    };
    if !root.join("data").join("PG_VERSION").is_file() {
        return Err(format!(
            "there is no embedded cluster in {} (looked in {}): name the server's --data-dir",
            data_dir.display(),
            root.display()
        )
        .into());
    }
    Ok(root)
}

fn cluster_options(root: PathBuf, storage: &StorageArgs) -> ClusterOptions {
    ClusterOptions {
        root,
        durability: Durability::Durable,
        max_connections: 100,
        bindir: storage.pg_bindir.clone(),
        preload: Vec::new(),
    }
}

/// The master keys and where they live: flags or environment, else `<data-dir>/master.key` (never made here).
fn master_key(storage: &StorageArgs, serve: &ServeArgs) -> Result<Option<(MasterKeys, String)>, BoxError> {
    if let Some(configured) = serve.master_key.as_deref() {
        let keys = data_dir::master_keys(&storage.data_dir, Some(configured), &serve.previous_master_keys)?;
        let location = "given to the server by --master-key (HOOKFLOW_MASTER_KEY), outside the data directory";
        return Ok(Some((keys, location.to_owned())));
    }
    let file = std::path::absolute(storage.data_dir.join(MASTER_KEY))?;
    if !file.exists() {
        return Ok(None);
    }
    Ok(Some((data_dir::read_key_file(&file)?, file.display().to_string())))
}

async fn schema_version(cluster: &EmbeddedCluster) -> Result<i64, BoxError> {
    let mut conn = cluster.connect_options(crate::db::EMBEDDED_DATABASE).connect().await?;
    let version: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success").fetch_one(&mut conn).await?;
    Ok(version.unwrap_or(0))
}

fn is_empty_or_absent(dir: &Path) -> Result<bool, BoxError> {
    match fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(format!("reading {}: {e}", dir.display()).into()),
    }
}

/// Makes the backup's directory (private), which must be absent or empty; whether it was made here.
fn prepare_target(to: &Path) -> Result<bool, BoxError> {
    if !is_empty_or_absent(to)? {
        return Err(format!(
            "{} is not empty: a backup goes into a new or empty directory (it never mixes with another)",
            to.display()
        )
        .into());
    }
    let created = !to.exists();
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)
        .map_err(|e| format!("creating {}: {e}", to.display()))?;
    // An empty directory made by someone else (a shared /backups, a name under /tmp) is refused: its owner could
    // read or replace what is written there, the cluster's files and the master key among them.
    let meta = fs::symlink_metadata(to).map_err(|e| format!("reading {}: {e}", to.display()))?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!(
            "{} is not a directory of this user's: a backup goes into a private directory",
            to.display()
        )
        .into());
    }
    fs::set_permissions(to, fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("making {} private: {e}", to.display()))?;
    Ok(created)
}

/// After a failure: removes what this command put in `dir` (and `dir` itself when it made it).
fn clear(dir: &Path, created: bool) {
    if created {
        let _ = fs::remove_dir_all(dir);
    } else if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        }
    }
}

/// Writes `text` to a new file only its owner reads (0600), synced.
fn write_private(path: &Path, text: &str) -> Result<(), BoxError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("creating {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

//! `hookflow-server backup` and `restore` (Operating II): a backup taken while captures keep arriving restores into
//! a fresh data directory that a server starts on, with every capture acknowledged before the backup began; the
//! master key travels only with `--include-master-key`; a backup never lands in a non-empty directory, a restore
//! never over a non-empty data directory nor from something that is not an intact backup; an external database is
//! pointed to the RUNBOOK.

use crate::SERVER;
use hookflow_tests::embedded_server::{EmbeddedServer, data_dir, operator};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Senders posting captures at once while the backup runs.
const SENDERS: usize = 3;

/// Every file under `dir` holding `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// The ids of every capture of `endpoint` the server holds (its NDJSON export).
async fn stored_ids(client: &reqwest::Client, server: &EmbeddedServer, endpoint: &str) -> HashSet<String> {
    let path = format!("/webhooks/{endpoint}/requests/export?format=ndjson");
    let reply = server.request(client, Method::GET, &path).send().await.expect("export");
    assert_eq!(reply.status(), 200);
    let text = reply.text().await.expect("text");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a line")["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn a_backup_under_capture_load_restores_every_acknowledged_capture() {
    let source = data_dir("backup-source");
    let server = EmbeddedServer::start(SERVER, &source, None).await;
    let client = reqwest::Client::new();
    let created = server.request(&client, Method::POST, "/webhooks").json(&json!({"name": "backed up"})).send().await;
    let endpoint = created.expect("create").json::<Value>().await.expect("json")["id"].as_str().expect("id").to_owned();

    // Captures keep arriving, acknowledged ones noted with the moment of their receipt.
    let acked: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let (sending, refused) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (client, url) = (client.clone(), format!("{}/webhook/{endpoint}", server.base));
            let (acked, sending, refused) = (acked.clone(), sending.clone(), refused.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while sending.load(Ordering::SeqCst) {
                    n += 1;
                    let reply = client.post(&url).json(&json!({"sender": s, "n": n})).send().await.expect("send");
                    if !reply.status().is_success() {
                        refused.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    let receipt: Value = reply.json().await.expect("receipt");
                    let id = receipt["request_id"].as_str().expect("request_id").to_owned();
                    acked.lock().expect("acked").push((id, Instant::now()));
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let backup = data_dir("backup-copy");
    let began = Instant::now();
    let made =
        operator(SERVER, &source, &["backup", "--to", backup.to_str().expect("path"), "--include-master-key"]).await;
    let backup_s = began.elapsed().as_secs_f64();
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    sending.store(false, Ordering::SeqCst);
    for sender in senders {
        sender.await.expect("sender");
    }
    assert!(made.success, "backup failed: {}\n{}", made.stdout, made.stderr);
    assert!(made.stdout.contains("backup complete"), "{}", made.stdout);
    let acked = acked.lock().expect("acked").clone();
    let before: Vec<&String> = acked.iter().filter(|(_, at)| *at < began).map(|(id, _)| id).collect();
    let during = acked.iter().filter(|(_, at)| *at >= began && *at < ended).count();
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no capture is refused while the backup runs");
    assert!(
        !before.is_empty() && during > 0,
        "captures arrived before ({}) and during ({during}) the backup",
        before.len()
    );
    let key = std::fs::read_to_string(source.join("master.key")).expect("the source's master key");
    assert!(!made.stdout.contains(key.trim()) && !made.stderr.contains(key.trim()), "the key is never printed");
    let known = (server.org.clone(), server.key.clone());
    server.stop().await;

    // Restored into a fresh data directory, a server starts on it with every capture acknowledged before the backup.
    let restored = data_dir("backup-restored");
    let started = Instant::now();
    let ran = operator(SERVER, &restored, &["restore", "--from", backup.to_str().expect("path")]).await;
    let restore_s = started.elapsed().as_secs_f64();
    assert!(ran.success, "restore failed: {}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("master key put back"), "{}", ran.stdout);
    assert_eq!(std::fs::read_to_string(restored.join("master.key")).expect("the restored key"), key);
    let server = EmbeddedServer::start(SERVER, &restored, Some(known)).await;
    let stored = stored_ids(&client, &server, &endpoint).await;
    let missing: Vec<&&String> = before.iter().filter(|id| !stored.contains(id.as_str())).collect();
    let during_kept = acked.iter().filter(|(id, at)| *at >= began && stored.contains(id)).count();
    eprintln!(
        "backup {backup_s:.1} s under load, restore {restore_s:.1} s: {} captures acknowledged before it began, \
         {during} during it ({during_kept} of them in the copy), {} in the restored database, {} missing",
        before.len(),
        stored.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "acknowledged before the backup and lost: {missing:?}");
    // The restored server takes new captures.
    let reply = client.post(format!("{}/webhook/{endpoint}", server.base)).body("after").send().await.expect("send");
    assert!(reply.status().is_success(), "{}", reply.status());
    server.stop().await;

    // Without --include-master-key (and with no server running: the backup starts the cluster and stops it), the
    // key is nowhere in the backup, which says where the key lives.
    let keyless = data_dir("backup-keyless");
    let made = operator(SERVER, &source, &["backup", "--to", keyless.to_str().expect("path")]).await;
    assert!(made.success, "backup failed: {}\n{}", made.stdout, made.stderr);
    assert!(made.stdout.contains(&source.join("master.key").display().to_string()), "{}", made.stdout);
    assert!(!keyless.join("master.key").exists());
    assert_eq!(files_holding(&keyless, key.trim().as_bytes()), Vec::<String>::new(), "the key's value is in no file");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(keyless.join("hookflow-backup.json")).expect("manifest"))
            .expect("json");
    assert_eq!(manifest["master_key"]["included"], false);
    let into = data_dir("backup-keyless-restored");
    let ran = operator(SERVER, &into, &["restore", "--from", keyless.to_str().expect("path")]).await;
    assert!(ran.success && ran.stdout.contains("holds no master key"), "{}\n{}", ran.stdout, ran.stderr);
    assert!(!into.join("master.key").exists());

    refusals(&source, &backup, &restored).await;
    for dir in [&source, &backup, &restored, &keyless, &into] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map(|mut entries| entries.next().is_none()).unwrap_or(false)
}

/// Each refusal exits non-zero, says why, and changes nothing.
async fn refusals(source: &Path, backup: &Path, restored: &Path) {
    let failed = |ran: &hookflow_tests::embedded_server::Ran, needle: &str| {
        assert!(
            !ran.success && ran.stderr.contains(needle),
            "expected a failure with `{needle}`: {}\n{}",
            ran.stdout,
            ran.stderr
        );
    };
    let path = |p: &Path| p.to_str().expect("path").to_owned();
    // A backup into a directory that holds something.
    let ran = operator(SERVER, source, &["backup", "--to", &path(backup)]).await;
    failed(&ran, "is not empty");
    assert!(backup.join("hookflow-backup.json").is_file(), "the earlier backup is untouched");
    // An empty directory someone else owns (a shared /backups): they could read or swap the key written there.
    let foreign = data_dir("backup-foreign");
    std::fs::create_dir_all(&foreign).expect("mkdir");
    let chowned =
        std::process::Command::new("chown").args(["postgres:postgres"]).arg(&foreign).status().expect("chown");
    assert!(chowned.success());
    let ran = operator(SERVER, source, &["backup", "--to", &path(&foreign), "--include-master-key"]).await;
    failed(&ran, "is not a directory of this user's");
    assert!(is_empty(&foreign), "nothing was written into it");
    let _ = std::fs::remove_dir_all(&foreign);
    // A restore over a data directory that holds something.
    let ran = operator(SERVER, restored, &["restore", "--from", &path(backup)]).await;
    failed(&ran, "is not empty");
    // A restore from what is not a backup: an empty directory, and a backup whose files were changed.
    let empty = data_dir("backup-empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let target = data_dir("backup-target");
    let ran = operator(SERVER, &target, &["restore", "--from", &path(&empty)]).await;
    failed(&ran, "is not a hookflow backup");
    assert!(!target.exists(), "nothing was made");
    let tampered = data_dir("backup-tampered");
    let copied = std::process::Command::new("cp").arg("-a").arg(backup).arg(&tampered).status().expect("cp");
    assert!(copied.success());
    std::fs::write(tampered.join("postgres/PG_VERSION"), "15\n\n").expect("tamper");
    let ran = operator(SERVER, &target, &["restore", "--from", &path(&tampered)]).await;
    failed(&ran, "pg_verifybackup");
    assert!(!target.exists(), "a failed restore leaves no data directory behind");
    // With an external database, the RUNBOOK's recipe.
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let ran = operator(SERVER, &target, &["--database-url", &url, "backup", "--to", &path(&target)]).await;
    failed(&ran, "docs/RUNBOOK.md");
    assert!(!ran.stderr.contains(&hookflow_tests::cluster::password()), "the URL's password is not echoed");
    // A data directory with no cluster.
    let ran = operator(SERVER, &empty, &["backup", "--to", &path(&target)]).await;
    failed(&ran, "there is no embedded cluster");
    for dir in [&empty, &target, &tampered] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

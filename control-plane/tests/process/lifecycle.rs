//! The real `hookflow-server` binary on the embedded default: first-start bootstrap, the data-directory lock,
//! graceful SIGTERM (PostgreSQL stops too), recovery after SIGKILL, operator commands, an external database URL,
//! readiness while PostgreSQL is down, keys kept out of the logs, the embedded runner and the first owner.

use crate::harness::*;
use hookflow_shared::wire::header;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn help_documents_every_setting() {
    let out = Command::new(BIN).arg("--help").output().expect("run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, env) in [
        ("--listen", "HOOKFLOW_LISTEN"),
        ("--public-url", "HOOKFLOW_PUBLIC_URL"),
        ("--data-dir", "HOOKFLOW_DATA_DIR"),
        ("--database-url", "HOOKFLOW_DATABASE_URL"),
        ("--master-key", "HOOKFLOW_MASTER_KEY"),
        ("--log-format", "HOOKFLOW_LOG_FORMAT"),
        ("--log", "HOOKFLOW_LOG"),
        ("--embedded-runner", "HOOKFLOW_EMBEDDED_RUNNER"),
        ("--lease-s", "HOOKFLOW_LEASE_S"),
    ] {
        assert!(help.contains(flag) && help.contains(env), "--help lacks {flag} / {env}:\n{help}");
    }
    for sub in ["orgs", "keys"] {
        assert!(help.contains(sub), "--help lacks the {sub} command");
    }
    let keys = Command::new(BIN).args(["keys", "create", "--help"]).output().expect("keys --help");
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(keys.contains("--expires-in") && keys.contains("--scopes") && keys.contains("--preset"), "{keys}");
}

#[test]
fn missing_postgresql_binaries_say_what_to_install() {
    let dir = DataDir::new("nobin");
    let mut server = Server::start(&dir.0, &["--pg-bindir", "/nonexistent/bin"]);
    let status = server.wait_exit(60);
    assert!(!status.success());
    let err = server.stderr();
    assert!(err.contains("apt-get install postgresql") && err.contains("--database-url"), "{err}");
}

/// First run as root in a fresh clone under a private home (as `git clone` lands in /root): the `postgres` user
/// cannot enter it, so the cluster gets its own directory under /var/lib/hookflow, remembered by a pointer in the
/// data directory; a restart finds it again. Where no directory would do, the server says what to change.
#[tokio::test(flavor = "multi_thread")]
async fn root_starts_with_no_flag_in_a_clone_under_a_private_home() {
    if !nix_is_root() {
        return; // Only root hands the cluster to the postgres user; an ordinary user owns its own directories.
    }
    let home = DataDir::new("home");
    std::fs::create_dir_all(home.0.join("clone")).expect("mkdir");
    std::fs::set_permissions(&home.0, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    let data = home.0.join("clone/.hookflow");
    let mut server = Server::start(&data, &["--embedded-runner", "off"]);
    let base = server.base_url();
    let pointer = std::fs::read_to_string(data.join("postgres.location")).expect("the pointer");
    let cluster = std::path::PathBuf::from(pointer.trim());
    // Removed at the end of the test, whatever happens.
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(self.0.join("data/postmaster.pid"))
                && let Some(pid) = pid.lines().next()
            {
                let _ = Command::new("kill").args(["-QUIT", pid]).status();
                std::thread::sleep(Duration::from_millis(500));
            }
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Remove(cluster.clone());
    assert!(cluster.starts_with("/var/lib/hookflow") && cluster.join("data/PG_VERSION").is_file(), "{cluster:?}");
    assert!(data.join("master.key").is_file(), "the master key stays in the data directory");
    let out = server.stdout();
    let (key, org) = (field(&out, "api key:"), field(&out, "organization id:"));
    let hook = post_json(&base, "/webhooks", &key, &org, serde_json::json!({"name": "home"})).await;
    let capture = reqwest::Client::new().post(hook["capture_url"].as_str().expect("url")).body("x").send().await;
    assert_eq!(capture.expect("capture").status(), 200);
    server.signal("-TERM");
    assert!(server.wait_exit(60).success());
    assert!(!cluster.join("data/postmaster.pid").exists(), "PostgreSQL stopped with the server");

    // A restart and an operator command find the same cluster through the pointer.
    let mut again = Server::start(&data, &["--embedded-runner", "off"]);
    let base = again.base_url();
    let (status, page) =
        get(&base, &format!("/webhooks/{}/requests", hook["id"].as_str().expect("id")), &key, &org).await;
    assert_eq!((status, page["items"].as_array().map(Vec::len)), (200, Some(1)), "{page}");
    let (ok, listed, err) = operator(&data, &["orgs", "list"]);
    assert!(ok && listed.contains(&org), "{err}");
    again.signal("-TERM");
    assert!(again.wait_exit(60).success());

    // Where the postgres user can enter neither place, the server stops and says what to change.
    let blocked = home.0.join("blocked");
    let mut refused = Server::start(&home.0.join("other"), &["--embedded-cluster-dir", &blocked.to_string_lossy()]);
    assert!(!refused.wait_exit(60).success());
    let err = refused.stderr();
    assert!(err.contains("can enter neither") && err.contains("--embedded-cluster-dir"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ordinary_user_runs_the_cluster_itself() {
    if !nix_is_root() {
        return; // The lifecycle test below already runs as an ordinary user.
    }
    // Run as `nobody`, from a copy of the binary it can execute (a checkout under /root is out of its reach).
    let dir = DataDir::new("nobody");
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let binary = dir.0.join("hookflow-server");
    std::fs::copy(BIN, &binary).expect("copy binary");
    let chown = Command::new("chown").args(["-R", "nobody"]).arg(&dir.0).status().expect("chown");
    assert!(chown.success());
    // setpriv execs in place (runuser would stand between us and the server and swallow the signal).
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(&binary)
        .arg("--data-dir")
        .arg(dir.0.join("data"))
        .args(["--listen", "127.0.0.1:0"])
        .current_dir("/")
        .env_remove("HOOKFLOW_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env("NO_COLOR", "1");
    let mut server = Server::spawn(&mut command);
    let Announced { base, org, key, .. } = server.announced();
    assert_eq!(get(&base, "/permissions", &key, &org).await.0, 200);
    let owner = Command::new("stat").args(["-c", "%U"]).arg(dir.0.join("data/postgres/data")).output().expect("stat");
    assert_eq!(String::from_utf8_lossy(&owner.stdout).trim(), "nobody", "the cluster belongs to the user running it");
    server.signal("-TERM");
    assert!(server.wait_exit(60).success(), "{}", server.stderr());
    assert!(!dir.0.join("data/postgres/data/postmaster.pid").exists());
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test(flavor = "multi_thread")]
async fn embedded_lifecycle_bootstrap_lock_signals_and_recovery() {
    let dir = DataDir::new("life");
    let mut first = Server::start(&dir.0, &["--log", "debug"]);
    let Announced { base, org, key, text: announced } = first.announced();
    assert!(announced.contains(&format!(
        "curl -H \"{}: {key}\" -H \"{}: {org}\" {base}/permissions",
        header::API_KEY,
        header::ORGANIZATION
    )));
    let (status, catalog) = get(&base, "/permissions", &key, &org).await;
    assert_eq!(status, 200);
    assert_eq!(catalog["scopes"].as_array().map(Vec::len), Some(16));
    let (_, me) = get(&base, "/api-keys", &key, &org).await;
    assert!(me["items"][0]["expires_at"].is_string(), "the bootstrap key expires");

    // A second server on the same directory refuses to start and touches nothing.
    let mut second = Server::start(&dir.0, &[]);
    assert!(!second.wait_exit(60).success());
    assert!(second.stderr().contains("another hookflow-server"), "{}", second.stderr());

    // Operator commands share the running server's cluster.
    let (ok, out, err) = operator(&dir.0, &["orgs", "create", "--name", "Globex"]);
    assert!(ok, "{err}");
    let globex = field(&out, "organization id:");
    let (ok, out, err) = operator(&dir.0, &["keys", "create", "--org", &globex, "--scopes", "flows:read,keys:read"]);
    assert!(ok, "{err}");
    let globex_key = field(&out, "key:");
    assert_eq!(get(&base, "/api-keys", &globex_key, &globex).await.0, 200);
    let (status, body) = get(&base, "/organization", &globex_key, &globex).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("insufficient_scope")));
    let (status, body) = get(&base, "/permissions", &globex_key, &org).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("organization_mismatch")));
    let (ok, out, _) = operator(&dir.0, &["keys", "create", "--org", &globex, "--preset", "ci", "--expires-in", "1s"]);
    assert!(ok);
    let short_key = field(&out, "key:");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get(&base, "/permissions", &short_key, &globex).await.0, 401, "expired");
    let (ok, _, err) = operator(&dir.0, &["keys", "create", "--org", &globex, "--scopes", "flows:fly"]);
    assert!(!ok && err.contains("unknown scope"), "{err}");

    // An external database URL (here: this cluster's socket, through DATABASE_URL) starts no cluster of its own.
    let other_dir = DataDir::new("external");
    let url = dir.database_url();
    let mut external =
        Server::spawn(server_command(&other_dir.0, &["--listen", "127.0.0.1:0"]).env("DATABASE_URL", &url));
    let external_base = external.base_url();
    assert_eq!(get(&external_base, "/permissions", &key, &org).await.0, 200, "same database, same keys");
    assert!(!other_dir.0.join("postgres").exists(), "no embedded cluster with a database URL");
    assert!(!external.stdout().contains("first start"), "not an empty database: no bootstrap");
    external.signal("-TERM");
    assert!(external.wait_exit(30).success());

    // Keys never reach the logs, even at debug level.
    let logs = first.stderr();
    for secret in [&key, &globex_key] {
        assert!(!logs.contains(secret.as_str()), "a key leaked into the log");
    }

    // SIGTERM: graceful exit, PostgreSQL stopped too.
    first.signal("-TERM");
    assert!(first.wait_exit(60).success(), "{}", first.stderr());
    assert!(!dir.postmaster_pid().exists(), "PostgreSQL still running after SIGTERM");

    // Restart: data kept, no second bootstrap.
    let mut again = Server::start(&dir.0, &[]);
    let base = again.base_url();
    assert_eq!(get(&base, "/permissions", &key, &org).await.0, 200);
    assert!(!again.stdout().contains("first start"));

    // Readiness follows the database: stop PostgreSQL behind the server's back, then bring it back.
    pg_ctl(&dir, &["stop", "-m", "fast"]);
    let (status, body) = get(&base, "/readyz", "", "").await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("unavailable")));
    // Keys are cached, so the database is needed by what the request reads, not by its authentication.
    assert_eq!(get(&base, "/webhooks", &key, &org).await.0, 503);
    pg_ctl(&dir, &["start"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&base, "/readyz", "", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "never ready again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SIGKILL leaves PostgreSQL orphaned; the next start adopts it and carries on.
    again.signal("-KILL");
    again.wait_exit(30);
    assert!(dir.postmaster_pid().exists(), "the orphaned cluster is still running");
    let mut recovered = Server::start(&dir.0, &[]);
    let base = recovered.base_url();
    assert!(recovered.stderr().contains("adopting"), "{}", recovered.stderr());
    assert_eq!(get(&base, "/permissions", &key, &org).await.0, 200);
    recovered.signal("-INT");
    assert!(recovered.wait_exit(60).success());
    assert!(!dir.postmaster_pid().exists());
}

/// Every capture id in an endpoint's history, through the NDJSON export.
async fn stored_ids(base: &str, webhook: &str, key: &str, org: &str) -> std::collections::HashSet<String> {
    let text = get_text(base, &format!("/webhooks/{webhook}/requests/export"), key, org).await;
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line")["id"].as_str().expect("id").to_owned())
        .collect()
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_captures_survive_sigkill_and_streams_cross_processes() {
    let dir = DataDir::new("durable");
    let mut server = Server::start(&dir.0, &[]);
    let Announced { base, org, key, .. } = server.announced();
    let hook = post_json(&base, "/webhooks", &key, &org, serde_json::json!({"name": "load"})).await;
    let webhook = hook["id"].as_str().expect("id").to_owned();

    // A second server process on the same database; a subscriber there sees captures taken by the first.
    let replica_dir = DataDir::new("replica");
    let url = dir.database_url();
    let mut replica =
        Server::spawn(server_command(&replica_dir.0, &["--listen", "127.0.0.1:0"]).env("HOOKFLOW_DATABASE_URL", &url));
    let replica_base = replica.base_url();
    let stream = reqwest::Client::new()
        .get(format!("{replica_base}/webhooks/{webhook}/stream"))
        .header(header::API_KEY, &key)
        .header(header::ORGANIZATION, &org)
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), 200);
    let receipt: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/webhook/{webhook}"))
        .body("across processes")
        .send()
        .await
        .expect("capture")
        .json()
        .await
        .expect("receipt");
    let expected = format!("id: {}", receipt["request_id"].as_str().expect("id"));
    let mut seen = String::new();
    let mut chunks = stream.bytes_stream();
    let arrived = tokio::time::timeout(Duration::from_secs(10), async {
        use futures_util::StreamExt as _;
        while let Some(chunk) = chunks.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
            if seen.contains(&expected) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(arrived, Ok(true), "the replica's subscriber got: {seen}");
    drop(chunks);
    replica.signal("-TERM");
    assert!(replica.wait_exit(30).success());

    // Load from 16 concurrent senders; SIGKILL the server mid-way.
    let acknowledged = Arc::new(Mutex::new(vec![receipt["request_id"].as_str().expect("id").to_owned()]));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut senders = Vec::new();
    for sender in 0..16 {
        let (url, acknowledged, stop) = (format!("{base}/webhook/{webhook}"), acknowledged.clone(), stop.clone());
        senders.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let Ok(response) = client.post(&url).body(format!("{{\"sender\":{sender},\"n\":{n}}}")).send().await
                else {
                    continue;
                };
                if response.status() == 200
                    && let Ok(receipt) = response.json::<serde_json::Value>().await
                    && let Some(id) = receipt["request_id"].as_str()
                {
                    acknowledged.lock().expect("lock").push(id.to_owned());
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.signal("-KILL");
    server.wait_exit(30);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for sender in senders {
        sender.await.expect("sender");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(acknowledged.len() > 50, "the load ran ({} acknowledged)", acknowledged.len());

    let mut restarted = Server::start(&dir.0, &[]);
    let base = restarted.base_url();
    let stored = stored_ids(&base, &webhook, &key, &org).await;
    let lost: Vec<_> = acknowledged.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "{} of {} acknowledged captures were lost: {lost:?}", lost.len(), acknowledged.len());
    restarted.signal("-TERM");
    assert!(restarted.wait_exit(60).success());
}

#[tokio::test]
async fn the_server_alone_runs_flows_through_its_embedded_runner() {
    let dir = DataDir::new("flows");
    let mut server = Server::start(&dir.0, &[]);
    let Announced { base, org, key, .. } = server.announced();
    let definition = serde_json::json!({"nodes": [{"id": "health", "kind": "request",
        "request": {"method": "GET", "url": format!("{base}/healthz")},
        "extractors": [{"name": "status", "kind": "statusCode"}],
        "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}]});
    let flow =
        post_json(&base, "/flows", &key, &org, serde_json::json!({"name": "health", "definition": definition})).await;
    let flow = flow["id"].as_str().expect("flow id").to_owned();
    let execution = post_json(&base, &format!("/flows/{flow}/launch"), &key, &org, serde_json::json!({})).await;
    let id = execution["id"].as_str().expect("execution id").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, current) = get(&base, &format!("/flows/{flow}/executions/{id}"), &key, &org).await;
        if current["status"] == "succeeded" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{current}\n{}", server.stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(server.stderr().contains("starting the embedded runner"));
    server.signal("-TERM");
    assert!(server.wait_exit(60).success(), "{}", server.stderr());

    // With the embedded runner off, launches wait for a runner.
    let mut quiet = Server::start(&dir.0, &["--embedded-runner", "off"]);
    let base = quiet.base_url();
    let execution = post_json(&base, &format!("/flows/{flow}/launch"), &key, &org, serde_json::json!({})).await;
    let id = execution["id"].as_str().expect("execution id").to_owned();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, current) = get(&base, &format!("/flows/{flow}/executions/{id}"), &key, &org).await;
    assert_eq!(current["status"], "queued");
    quiet.signal("-TERM");
    assert!(quiet.wait_exit(60).success());
}

async fn sign_in(base: &str, email: &str, password: &str) -> (u16, serde_json::Value) {
    let reply = reqwest::Client::new()
        .post(format!("{base}/auth/sessions"))
        .json(&serde_json::json!({"email": email, "password": password}))
        .send()
        .await
        .expect("sign in");
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or_default())
}

/// One scenario: the first start's owner, `users create|reset-password` and `keys rotate-signing` against a
/// running server.
#[tokio::test]
async fn people_operator_commands_and_the_first_owner() {
    let dir = DataDir::new("people");
    let mut server = Server::start(&dir.0, &["--embedded-runner", "off"]);
    let Announced { base, org, text: announced, .. } = server.announced();
    let (owner, owner_password) = (field(&announced, "email:"), field(&announced, "one-time password:"));
    assert_eq!(owner, "owner@hookflow.local");
    // The first start says where the app is, and the app is there.
    assert!(announced.contains(&format!("Sign in to the app at {base}/")), "{announced}");
    let page = reqwest::get(format!("{base}/")).await.expect("the app's page");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.expect("html").contains("/app/js/main.js"));
    let (status, session) = sign_in(&base, &owner, &owner_password).await;
    assert_eq!((status, &session["password_change_required"]), (201, &serde_json::json!(true)), "{session}");

    let (ok, out, err) =
        operator(&dir.0, &["users", "create", "--email", "Ada@Example.com", "--org", &org, "--role", "admin"]);
    assert!(ok, "{err}");
    let first = field(&out, "one-time password:");
    assert_eq!(sign_in(&base, "ada@example.com", &first).await.0, 201);
    let (ok, _, err) = operator(&dir.0, &["users", "create", "--email", "ada@example.com", "--org", &org]);
    assert!(!ok && err.contains("exists"), "{err}");
    let (ok, out, err) = operator(&dir.0, &["users", "reset-password", "--email", "ada@example.com"]);
    assert!(ok, "{err}");
    let second = field(&out, "one-time password:");
    assert_eq!(sign_in(&base, "ada@example.com", &first).await.0, 401, "the old password is gone");
    assert_eq!(sign_in(&base, "ada@example.com", &second).await.0, 201);

    let jwks = || async {
        let keys: serde_json::Value =
            reqwest::get(format!("{base}/.well-known/jwks.json")).await.expect("jwks").json().await.expect("json");
        keys["keys"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(jwks().await, 1);
    let (ok, out, err) = operator(&dir.0, &["keys", "rotate-signing"]);
    assert!(ok && out.contains("created signing key"), "{err}");
    let mut published = 0;
    for _ in 0..50 {
        published = jwks().await;
        if published == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(published, 2, "the running server heard of the rotation");
    server.signal("-TERM");
    assert!(server.wait_exit(60).success());
}

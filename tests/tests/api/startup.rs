//! Starting `hookflow-server` processes: every listener is bound before anything else starts, so a second server
//! on a taken metrics port stops at once with a message naming the flag, without starting (and then closing)
//! its background tasks; boolean variables take 1/0 and yes/no; a bad `--database-url` stops it, naming no password.

use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

#[tokio::test]
async fn a_second_server_on_a_taken_metrics_port_stops_before_starting_anything() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("take a port");
    let address = taken.local_addr().expect("address").to_string();
    let data = std::env::temp_dir().join(format!("hookflow-second-{}", uuid::Uuid::new_v4()));
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let mut command = hookflow_tests::server::command(SERVER, &url, &data);
    command
        .args(["--embedded-runner", "on"])
        .env("HOOKFLOW_METRICS_LISTEN", &address)
        // Boolean variables as operators write them.
        .env("HOOKFLOW_ALLOW_PRIVATE_TARGETS", "yes")
        .env("HOOKFLOW_SIGNUP", "1");
    let (ok, text) = stopped(command, &data).await;
    assert!(!ok, "{text}");
    assert!(text.contains("--metrics-listen") && text.contains(&address), "{text}");
    assert!(!text.contains("closed pool"), "background tasks were started before the listeners: {text}");
    assert!(!text.contains("organization id:"), "nothing was bootstrapped: {text}");
    drop(taken);
}

/// Runs a server that must stop by itself within a minute; answers whether it succeeded and all it printed, and
/// removes its data directory `data`.
async fn stopped(mut command: tokio::process::Command, data: &std::path::Path) -> (bool, String) {
    let child = command.spawn().expect("spawn hookflow-server");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the server stops by itself")
        .expect("wait");
    let _ = std::fs::remove_dir_all(data);
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Runs the server with `--database-url url` and answers its exit status and all it printed.
async fn start_with_database_url(url: &str) -> (bool, String) {
    let data = std::env::temp_dir().join(format!("hookflow-url-{}", uuid::Uuid::new_v4()));
    stopped(hookflow_tests::server::command(SERVER, url, &data), &data).await
}

/// Hardening IV (16): a malformed `--database-url` stops the server with an error that names no part of its
/// password, however the string is broken.
#[tokio::test]
async fn a_malformed_database_url_never_echoes_its_password() {
    for url in [
        "postgres://hookflow:Sup3r-s3cret/pa:ss@127.0.0.1:54x2/hookflow",
        "postgres://hookflow:Sup3r-s3cret%2Fpa@127.0.0.1:notaport/hookflow",
        "postgres://hookflow:Sup3r-s3cret%2Fpa@127.0.0.1:5432,127.0.0.1:x/hookflow",
        "host=127.0.0.1 port=1,2,3 password=Sup3r-s3cret/pa:ss",
    ] {
        let (ok, text) = start_with_database_url(url).await;
        assert!(!ok, "{url}: {text}");
        assert!(text.contains("database URL is not valid"), "{url}: {text}");
        for piece in ["Sup3r", "s3cret", "pa:ss", "%2Fpa"] {
            assert!(!text.contains(piece), "{url} printed part of its password: {text}");
        }
    }
}

/// Hardening IV (16): `target_session_attrs=any` with several hosts would let the primary's pool (keys, sessions,
/// writes) land on a standby: refused at start, saying what to use instead.
#[tokio::test]
async fn any_session_with_several_primary_hosts_is_refused_at_start() {
    let (ok, text) =
        start_with_database_url("postgres://hookflow@127.0.0.1:1,127.0.0.1:2/hookflow?target_session_attrs=any").await;
    assert!(!ok, "{text}");
    assert!(text.contains("target_session_attrs=any") && text.contains("read-write"), "{text}");
}

/// Operating II (rolling upgrades): a database a newer release migrated (a migration this binary does not know
/// is applied) no longer stops the server; it says so and serves.
#[tokio::test]
async fn a_schema_newer_than_the_server_knows_is_tolerated() {
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");
    hookflow_control_plane::db::migrate(&pool).await.expect("the schema this binary knows");
    let newer = hookflow_control_plane::db::newest_known_migration() + 1_000_000;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'from a newer release', true, '\\x00', 1)",
    )
    .bind(newer)
    .execute(&pool)
    .await
    .expect("a newer release's migration");
    pool.close().await;
    let data = std::env::temp_dir().join(format!("hookflow-newer-{}", uuid::Uuid::new_v4()));
    let mut child = hookflow_tests::server::command(SERVER, &url, &data)
        .args(["--embedded-runner", "off"])
        .env("HOOKFLOW_METRICS_LISTEN", "off")
        .spawn()
        .expect("spawn hookflow-server");
    let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut said = Vec::new();
    let listening = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = err.next_line().await {
            said.push(line.clone());
            if line.contains("hookflow-server listening") {
                return Some(line);
            }
        }
        None
    })
    .await
    .expect("the server starts in time")
    .unwrap_or_else(|| panic!("the server stopped: {said:?}"));
    assert!(said.iter().any(|l| l.contains("newer than this server knows")), "{said:?}");
    let address = listening.split("address=").nth(1).and_then(|a| a.split_whitespace().next()).expect("address");
    let health = reqwest::get(format!("http://{address}/readyz")).await.expect("readyz");
    assert_eq!(health.status(), 200);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_dir_all(&data);
}

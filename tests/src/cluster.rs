//! The per-process PostgreSQL cluster and the per-test database cloned from a migrated template.

use hookflow_control_plane::db::{self, embedded};
use sqlx::ConnectOptions as _;
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const TEMPLATE: &str = "hookflow_template";

struct TestCluster {
    cluster: embedded::EmbeddedCluster,
}

static CLUSTER: OnceLock<TestCluster> = OnceLock::new();

fn start() -> TestCluster {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    // Under /tmp: the postgres user must be able to enter every parent, which a checkout under /root denies.
    let root = PathBuf::from(format!("/tmp/hookflow-test-{}-{nanos}", std::process::id()));
    let mut options = embedded::ClusterOptions::new(root.clone(), embedded::Durability::Throwaway, 300);
    // Tests that count statements read `pg_stat_statements` (each creates the extension in its own database).
    options.preload.push("pg_stat_statements".to_owned());
    let cluster = embedded::EmbeddedCluster::start(&options).expect("start the test PostgreSQL cluster");
    reap_when_done(&root);
    let admin = cluster.connect_options("postgres");
    let template = cluster.connect_options(TEMPLATE);
    // The template is built on a runtime of its own: this may run inside any test's runtime.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            db::ensure_database(admin, TEMPLATE).await.expect("create the template database");
            let pool = db::pool(template, 2);
            db::migrate(&pool).await.expect("migrate the template database");
            pool.close().await;
        });
    })
    .join()
    .expect("template thread");
    TestCluster { cluster }
}

/// A detached watcher that, once this test process exits, stops the cluster at once and removes its directory.
fn reap_when_done(root: &std::path::Path) {
    let script = r#"pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$2/data/postmaster.pid" ] || break; sleep 0.5; done
rm -rf "$2""#;
    after_exit(script, root, "the test cluster");
}

/// Runs the shell `script` (`$2` is `dir`) in a detached process once this test process has exited, whatever the
/// way it ends: what a test leaves running or on disk under `dir` goes with it.
pub fn after_exit(script: &str, dir: &std::path::Path, what: &str) {
    use std::os::unix::process::CommandExt as _;
    let script = format!("tail --pid=\"$1\" -f /dev/null 2>/dev/null\n{script}");
    let spawned = Command::new("sh")
        .args(["-c", &script, "reaper", &std::process::id().to_string()])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        eprintln!("warning: cannot start the reaper of {what} ({e}); {} may outlive the tests", dir.display());
    }
}

/// The test cluster's superuser password (for tools such as pg_dump).
pub fn password() -> String {
    CLUSTER.get_or_init(start).cluster.password().to_owned()
}

/// A new, empty, fully migrated database for one test.
pub async fn fresh_database() -> PgConnectOptions {
    let cluster = &CLUSTER.get_or_init(start).cluster;
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = cluster.connect_options("postgres").connect().await.expect("connect to the test cluster");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE {TEMPLATE}")))
        .execute(&mut conn)
        .await
        .expect("clone the template database");
    cluster.connect_options(&name)
}

/// A fresh database as a `postgres://` URL, for server processes (`--database-url`).
pub async fn fresh_database_url() -> String {
    let options = fresh_database().await;
    let socket = options.get_socket().map(|s| s.display().to_string()).unwrap_or_default();
    format!(
        "postgres://{}:{}@localhost/{}?host={socket}",
        options.get_username(),
        password(),
        options.get_database().unwrap_or_default()
    )
}

//! The RUNBOOK's pgBackRest recipe for an external PostgreSQL, run as written: the test reads the `recipe:pgbackrest-*`
//! blocks from docs/RUNBOOK.md and runs them as the postgres user against a real PostgreSQL 15 cluster under a real
//! server (full backup with WAL archiving, a batch of captures, a noted time, another batch, a restore to that time),
//! then checks that the restored database holds exactly the first batch. A changed recipe is a changed test.

use crate::SERVER;
use hookflow_tests::plain_cluster::{PlainCluster, as_postgres, succeeded};
use hookflow_tests::server::ServerProcess;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Captures in each batch.
const BATCH: usize = 30;

/// The shell of the RUNBOOK's block `recipe:pgbackrest-<step>`, without the indentation of its fence.
fn recipe(step: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/RUNBOOK.md");
    let runbook = std::fs::read_to_string(path).expect("docs/RUNBOOK.md");
    let fence = format!("```sh recipe:pgbackrest-{step}");
    let mut lines = runbook.lines().skip_while(|l| l.trim() != fence);
    let opening = lines.next().unwrap_or_else(|| panic!("the RUNBOOK has no block {fence}"));
    let indent = opening.len() - opening.trim_start().len();
    let body: Vec<&str> = lines.take_while(|l| l.trim() != "```").map(|l| l.get(indent..).unwrap_or("")).collect();
    body.join("\n")
}

/// Runs a step of the recipe after its settings, as the postgres user, with the cluster's places.
fn run(cluster: &PlainCluster, step: &str, target: Option<&str>) -> String {
    let script = format!("{}\n{}\n", recipe("settings"), recipe(step));
    let (conf, repo) = (cluster.root().join("pgbackrest.conf"), cluster.root().join("repo"));
    let path = format!(
        "{}:{}",
        std::path::Path::new(&cluster.bin("psql")).parent().expect("bindir").display(),
        "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
    let mut env = vec![
        ("CONF", conf.to_str().expect("path")),
        ("REPO", repo.to_str().expect("path")),
        ("PGDATA", cluster.data.to_str().expect("path")),
        ("PGHOST", cluster.socket.to_str().expect("path")),
        ("PGPORT", "5432"),
        ("PATH", &path),
    ];
    if let Some(target) = target {
        env.push(("TARGET", target));
    }
    let output = succeeded(&format!("the recipe's {step}"), as_postgres("sh", &["-euc", &script], &env));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Sends `n` captures to `endpoint`; their receipts' ids.
async fn batch(server: &ServerProcess, endpoint: &str, label: &str) -> BTreeSet<String> {
    let client = reqwest::Client::new();
    let mut ids = BTreeSet::new();
    for i in 0..BATCH {
        let reply = client
            .post(format!("{}/webhook/{endpoint}", server.base))
            .json(&json!({"batch": label, "i": i}))
            .send()
            .await
            .expect("send");
        assert!(reply.status().is_success(), "{}", reply.status());
        let receipt: Value = reply.json().await.expect("receipt");
        ids.insert(receipt["request_id"].as_str().expect("request_id").to_owned());
    }
    ids
}

#[tokio::test]
async fn the_runbooks_pgbackrest_recipe_restores_to_a_moment_between_two_batches() {
    let cluster = PlainCluster::start("pgbackrest");
    run(&cluster, "configure", None);
    cluster.pg_ctl(&["restart", "-w", "-m", "fast", "-t", "60"]);
    assert_eq!(cluster.psql("SHOW archive_mode"), "on");
    let mut server = ServerProcess::spawn_at(SERVER, &cluster.url(), &[]).await;
    let started = Instant::now();
    let info = run(&cluster, "backup", None);
    let backup_s = started.elapsed().as_secs_f64();
    assert!(info.contains("full backup"), "{info}");

    let webhook = server.post_as(&server.org, &server.key, "/webhooks", &json!({"name": "archived"})).await;
    let endpoint = webhook["id"].as_str().expect("id").to_owned();
    let first = batch(&server, &endpoint, "first").await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let target = cluster.psql("SELECT now()");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let second = batch(&server, &endpoint, "second").await;
    run(&cluster, "check", None);

    // Everything stops; the restore to the noted moment; PostgreSQL replays up to it and opens for writes.
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    cluster.pg_ctl(&["stop", "-w", "-m", "fast"]);
    let started = Instant::now();
    run(&cluster, "restore", Some(&target));
    cluster.pg_ctl(&["start", "-w", "-t", "120"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while cluster.psql("SELECT pg_is_in_recovery()") != "f" {
        assert!(Instant::now() < deadline, "still recovering: {}", cluster.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let restore_s = started.elapsed().as_secs_f64();

    let restored = ServerProcess::spawn_beside(SERVER, &server, &[]).await;
    let path = format!("{}/webhooks/{endpoint}/requests/export?format=ndjson", restored.base);
    let reply = reqwest::Client::new()
        .get(path)
        .header("x-api-key", &server.key)
        .header("x-organization-id", &server.org)
        .send()
        .await
        .expect("export");
    assert_eq!(reply.status(), 200);
    let text = reply.text().await.expect("text");
    let stored: BTreeSet<String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line")["id"].as_str().expect("id").to_owned())
        .collect();
    eprintln!(
        "pgBackRest: full backup {backup_s:.1} s, restore to {target} and recovery {restore_s:.1} s; {} captures \
         before the moment, {} after, {} restored ({} of the first batch, {} of the second)",
        first.len(),
        second.len(),
        stored.len(),
        stored.intersection(&first).count(),
        stored.intersection(&second).count()
    );
    assert_eq!(stored, first, "the restore holds exactly the captures before the moment");
    // The restored database takes writes.
    let reply = reqwest::Client::new().post(format!("{}/webhook/{endpoint}", restored.base)).body("after").send().await;
    assert!(reply.expect("send").status().is_success());
    restored.stop().await;
    server.stop().await;
    cluster.pg_ctl(&["stop", "-w", "-m", "fast"]);
    let _ = as_postgres("rm", &["-rf", cluster.root().to_str().expect("path")], &[]);
}

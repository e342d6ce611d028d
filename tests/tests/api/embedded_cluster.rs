//! The embedded cluster trusts nobody: a connection without the password is refused, its socket directory and
//! data are private (an existing data directory is tightened), and a directory name that would break out of a
//! shell string is refused before anything runs.

use hookflow_control_plane::db::embedded::{ClusterOptions, Durability, EmbeddedCluster};
use sqlx::ConnectOptions as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

fn root(tag: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/hookflow-private-{tag}-{}", uuid::Uuid::new_v4().simple()))
}

fn options(root: PathBuf) -> ClusterOptions {
    ClusterOptions::new(root, Durability::Throwaway, 10)
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
}

/// One scenario: start a cluster over a loosened data directory, then try it with and without the password.
#[tokio::test]
async fn the_embedded_cluster_takes_passwords_only_and_keeps_its_files_private() {
    let root = root("auth");
    let options = options(root.clone());
    let cluster = tokio::task::spawn_blocking({
        let options = options.clone();
        move || EmbeddedCluster::start(&options)
    })
    .await
    .expect("thread")
    .expect("start");
    cluster.stop().expect("stop");
    // Someone loosened the data directory while it was stopped: the next start tightens it again.
    std::fs::set_permissions(root.join("data"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cluster =
        tokio::task::spawn_blocking(move || EmbeddedCluster::start(&options)).await.expect("thread").expect("restart");
    assert_eq!(mode(&root.join("data")), 0o700);
    assert_eq!(mode(&root.join("run")), 0o700, "the socket directory is private");
    assert_eq!(mode(&root.join("password")) & 0o077, 0, "the password file is the owner's alone");

    let with_password = cluster.connect_options("postgres");
    let mut conn = with_password.connect().await.expect("the password opens the cluster");
    let method: String = sqlx::query_scalar("SELECT auth_method FROM pg_hba_file_rules WHERE type = 'local' LIMIT 1")
        .fetch_one(&mut conn)
        .await
        .expect("hba rules");
    assert_eq!(method, "scram-sha-256");
    drop(conn);
    let without = with_password.clone().password("");
    let refused = without.connect().await.expect_err("no password, no connection");
    let wrong = with_password.password("guess").connect().await.expect_err("a wrong password is refused");
    for error in [refused, wrong] {
        let code = error.as_database_error().and_then(|e| e.code()).map(|c| c.into_owned()).unwrap_or_default();
        assert!(code == "28P01" || code == "28000" || error.to_string().contains("password"), "{error}");
    }
    cluster.stop().expect("stop");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_directory_name_with_shell_characters_is_refused_before_anything_runs() {
    let witness = std::env::temp_dir().join(format!("hookflow-pwned-{}", uuid::Uuid::new_v4().simple()));
    let root = PathBuf::from(format!("/tmp/hookflow-x$(touch {})", witness.display()));
    let error = EmbeddedCluster::start(&options(root.clone())).expect_err("refused");
    assert!(error.to_string().contains("choose another --data-dir"), "{error}");
    assert!(!witness.exists(), "nothing was run through a shell");
    assert!(!root.exists(), "nothing was created");
}

//! The previous release's `hookflow-server`, for the rolling-upgrade test: the commit named on docs/RUNBOOK.md's
//! `previous release: <commit>` line, its sources taken out of git (`git archive`, nothing added to the repository)
//! into `<target>/previous-release/<commit>/src` and built once with the workspace's own target directory, so the
//! dependencies already built for this workspace are reused and only hookflow's own crates compile. The binary is
//! kept at `<target>/previous-release/<commit>/hookflow-server`: later runs find it and build nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The workspace's root (this crate's parent directory).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The commit the RUNBOOK names as the previous release.
pub fn commit() -> String {
    let runbook = std::fs::read_to_string(workspace().join("docs/RUNBOOK.md")).expect("docs/RUNBOOK.md");
    let line = runbook.lines().find_map(|l| l.trim().strip_prefix("previous release: ")).expect("the RUNBOOK's line");
    let commit = line.trim().trim_matches('`').to_owned();
    assert!(commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()), "not a commit: {commit}");
    commit
}

/// The workspace's target directory (`CARGO_TARGET_DIR` when set).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from)
}

fn run(what: &str, command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what}: {status}");
}

/// The previous release's server binary, built when missing; how long getting it took (a build, or a look).
pub fn server(commit: &str) -> (PathBuf, std::time::Duration) {
    let started = Instant::now();
    let home = target_dir().join("previous-release").join(commit);
    let binary = home.join("hookflow-server");
    if binary.is_file() {
        return (binary, started.elapsed());
    }
    let src = home.join("src");
    if !src.join("Cargo.toml").is_file() {
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src).expect("the sources' directory");
        let archive =
            format!("git -C '{}' archive --format=tar {commit} | tar -x -C '{}'", workspace().display(), src.display());
        run("git archive", Command::new("sh").args(["-ec", &archive]));
        // Cargo names a workspace crate's artifacts after its name, version and path inside its workspace, the same
        // here as in this workspace: with the same version, this build would overwrite this workspace's own crates
        // in the shared target directory (and take theirs for its own when its files look older). A version of
        // its own keeps them apart; the registry's crates are the same units and are reused.
        let manifest = src.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("the previous release's Cargo.toml");
        let versioned: Vec<String> = text
            .lines()
            .map(|line| match line.strip_prefix("version = \"").and_then(|v| v.strip_suffix('"')) {
                Some(version) => format!("version = \"{version}-previous\""),
                None => line.to_owned(),
            })
            .collect();
        let versioned = versioned.join("\n") + "\n";
        assert_ne!(text, versioned, "the workspace's version line");
        std::fs::write(&manifest, versioned).expect("write Cargo.toml");
    }
    // The workspace's own target directory: dependencies built for this workspace are reused. The build puts its
    // binary at <target>/debug/hookflow-server, where this workspace's own server is: that one is put back after.
    let target = target_dir();
    let uplifted = target.join("debug").join("hookflow-server");
    let kept = home.join("hookflow-server.current");
    let had_current = std::fs::copy(&uplifted, &kept).is_ok();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let built = Command::new(cargo)
        .args(["build", "--offline", "-p", "hookflow-control-plane", "--bin", "hookflow-server", "--target-dir"])
        .arg(&target)
        .current_dir(&src)
        .env_remove("CARGO_TARGET_DIR")
        .status();
    let copied = std::fs::copy(&uplifted, home.join("hookflow-server.new"));
    if had_current {
        std::fs::rename(&kept, &uplifted).expect("put this workspace's server back");
    }
    assert!(built.expect("run cargo").success(), "building the previous release {commit} failed");
    copied.expect("the previous release's binary");
    std::fs::rename(home.join("hookflow-server.new"), &binary).expect("keep the binary");
    (binary, started.elapsed())
}

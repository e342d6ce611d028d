//! Starting `hookflow-server` processes: every listener is bound before anything else starts, so a second server
//! on a taken metrics port stops at once with a message naming the flag, without starting (and then closing)
//! its background tasks; boolean variables take 1/0 and yes/no.

use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

#[tokio::test]
async fn a_second_server_on_a_taken_metrics_port_stops_before_starting_anything() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("take a port");
    let address = taken.local_addr().expect("address").to_string();
    let data = std::env::temp_dir().join(format!("hookflow-second-{}", uuid::Uuid::new_v4()));
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let child = hookflow_tests::server::command(SERVER, &url, &data)
        .args(["--embedded-runner", "on"])
        .env("HOOKFLOW_METRICS_LISTEN", &address)
        // Boolean variables as operators write them.
        .env("HOOKFLOW_ALLOW_PRIVATE_TARGETS", "yes")
        .env("HOOKFLOW_SIGNUP", "1")
        .spawn()
        .expect("spawn hookflow-server");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the server stops by itself")
        .expect("wait");
    let _ = std::fs::remove_dir_all(&data);
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("--metrics-listen") && text.contains(&address), "{text}");
    assert!(!text.contains("closed pool"), "background tasks were started before the listeners: {text}");
    assert!(!text.contains("organization id:"), "nothing was bootstrapped: {text}");
    drop(taken);
}

//! `target-server ADDRESS`: the tests' HTTP target (`hookflow_tests::target`) as a process of its own, so a test
//! can run it inside a network namespace it made. Prints its base URL on one line, then serves until its
//! standard input closes.

use std::io::Read as _;

#[tokio::main]
async fn main() {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let target = hookflow_tests::target::Target::spawn_on(&address).await;
    println!("{}", target.base);
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
}

//! `hookflow-bench inspector`: how long a capture takes to show in the app's live inspector, in a real browser
//! (Debian's Chromium over WebDriver), while captures arrive at a steady rate; beside the same captures seen by a
//! raw SSE subscriber in the same run (what the stream alone costs).

use crate::capture::subscribe_and_send;
use crate::load::{self, BoxError};
use crate::setup::Rig;
use hookflow_control_plane::api::people::{passwords, signup, store};
use hookflow_shared::Role;
use hookflow_tests::browser::Browser;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Captures per second while the inspector is open.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// Seconds the captures arrive for.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

/// Records, in the page, when each capture's row appears in the inspector (epoch microseconds).
const WATCH: &str = "window.__seen = {};
    new MutationObserver((changes) => { const now = (performance.timeOrigin + performance.now()) * 1000;
      for (const change of changes) for (const node of change.addedNodes)
        if (node.dataset && node.dataset.id && !(node.dataset.id in window.__seen)) window.__seen[node.dataset.id] = now; })
    .observe(document.getElementById('captures'), { childList: true });";

pub async fn run(args: Args) -> Result<(), BoxError> {
    Rig::around(async |rig| measure(rig, &args).await).await
}

async fn measure(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    let (email, password) = ("bench@hookflow.local", "bench-password-long-enough");
    let mut conn = rig.pool.acquire().await?;
    let user = store::create_user(&mut conn, email, &passwords::hash(password.into()).await?, false).await?;
    signup::add_membership(&mut conn, rig.org, user, Role::Owner).await?;
    drop(conn);
    let webhook = rig.webhook("inspector").await?;

    let browser = Browser::start(1280).await;
    browser.sign_in(&rig.base, email, password).await;
    browser.goto(&format!("{}/#/webhooks/{webhook}", rig.base)).await;
    browser.wait_text("#stream-state", "live").await;
    browser.run(WATCH, vec![]).await;

    // One raw subscriber and the paced senders share a timeline; each capture's body carries its send time.
    let (base, key, org, hook) = (rig.base.clone(), rig.key.clone(), rig.org.to_string(), webhook.clone());
    let (rate, seconds) = (args.rate, args.seconds);
    let (sent, raw) =
        load::on_load_runtime(
            move || async move { subscribe_and_send(&base, &key, &org, &hook, 1, rate, seconds).await },
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen: HashMap<String, f64> = serde_json::from_value(browser.run("return window.__seen", vec![]).await)?;
    browser.close().await;

    let sent_at: Vec<(uuid::Uuid, Vec<u8>)> = sqlx::query_as(
        "SELECT c.id, c.body FROM captures c JOIN webhooks w ON w.id = c.webhook_id WHERE w.id = $1::uuid",
    )
    .bind(&webhook)
    .fetch_all(&rig.pool)
    .await?;
    let mut in_browser = Vec::new();
    for (id, body) in sent_at {
        let body: serde_json::Value = serde_json::from_slice(&body)?;
        let (Some(t), Some(shown)) = (body["t"].as_u64(), seen.get(&id.to_string())) else { continue };
        in_browser.push(((*shown as u64).saturating_sub(t)).min(u64::from(u32::MAX)) as u32);
    }
    let ((p50, p99), shown, rate) = (load::p50_p99_ms(&in_browser), in_browser.len(), sent as f64 / seconds as f64);
    println!(
        "capture -> live inspector (Chromium): {rate:.0} captures/s for {seconds} s; {shown} of {sent} shown; p50 {p50:.1} ms, p99 {p99:.1} ms (target p99 <= 1000 ms)"
    );
    println!(
        "baseline, raw SSE subscriber in the same run: {} of {sent} seen; p50 {:.1} ms, p99 {:.1} ms",
        raw.len(),
        load::percentile_ms(&raw, 50.0),
        load::percentile_ms(&raw, 99.0)
    );
    Ok(())
}

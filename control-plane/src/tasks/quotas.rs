//! The quotas' loop: reads the capture path's view of the organizations' usage again every `--quota-refresh-ms`,
//! and every 15 s publishes the usage of all organizations together (`hookflow_usage_stored_bytes`,
//! `hookflow_usage_captures_today`: totals, no label per organization).

use crate::state::AppState;
use std::time::{Duration, Instant};

/// How often the totals are read.
const TOTALS_EVERY: Duration = Duration::from_secs(15);

pub async fn run(app: AppState) {
    let mut totals_read: Option<Instant> = None;
    let pass = || {
        let app = app.clone();
        let due = totals_read.is_none_or(|at| at.elapsed() >= TOTALS_EVERY);
        if due {
            totals_read = Some(Instant::now());
        }
        async move {
            app.capture.quotas.refresh().await?;
            if due {
                let (bytes, captures) = crate::quota::usage::totals(&app.pool).await?;
                metrics::gauge!("hookflow_usage_stored_bytes").set(bytes as f64);
                metrics::gauge!("hookflow_usage_captures_today").set(captures as f64);
            }
            Ok::<(), sqlx::Error>(())
        }
    };
    let interval = app.settings.quota_refresh.max(Duration::from_millis(50));
    crate::tasks::periodic::every(app.shutdown.clone(), interval, "refreshing the quotas' usage", pass).await;
}

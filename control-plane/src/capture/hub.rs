//! Live fan-out of captures to stream subscribers. One topic per endpoint with subscribers in this process: a
//! NOTIFY (sent by whichever server stored the capture) wakes the topic, which reads the new rows once and
//! broadcasts them to every local subscriber. A topic with no subscribers left retires. While a topic lives, its
//! row in `capture_watchers` (refreshed every minute) asks the capture writers to NOTIFY its endpoint; a batch
//! that was already in flight when the row appeared is found by the topic's first re-check, half a second in.

use crate::capture::row::{CAPTURE_COLUMNS_INLINE, CaptureRow};
use crate::db::watch::Watch;
use crate::error::{ApiResult, to_json};
use hookflow_shared::api::webhooks::Capture;
use hookflow_shared::{CaptureId, WebhookId};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const FETCH: i64 = 500;
/// How often a topic reads without a wake-up: soon after it starts (a batch in flight while its watch was being
/// recorded did not notify), then as a safety net.
const FIRST_RECHECK: Duration = Duration::from_millis(500);
const RECHECK: Duration = Duration::from_secs(5);
/// How often a topic refreshes its watch; writers ignore watches older than five minutes.
const WATCH_REFRESH: Duration = Duration::from_secs(60);

/// A capture ready to send: its id (the SSE event id) and its one-line JSON payload.
#[derive(Debug)]
pub struct LiveEvent {
    pub id: CaptureId,
    pub data: String,
}

#[derive(Debug)]
struct Topic {
    sender: broadcast::Sender<Arc<LiveEvent>>,
    wake: Notify,
}

#[derive(Debug)]
pub struct StreamHub {
    pool: PgPool,
    /// This process among the replicas, in `capture_watchers`.
    replica: Uuid,
    topics: Mutex<HashMap<WebhookId, Arc<Topic>>>,
    shutdown: CancellationToken,
    /// Events buffered per subscriber before it is told it lagged.
    buffer: usize,
}

/// The stream payload of a capture: `{"type": "request.captured", ...the captured request}`.
pub fn event_json(capture: Capture) -> ApiResult<String> {
    let mut value = to_json(&capture)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("type".into(), "request.captured".into());
    }
    Ok(value.to_string())
}

/// Captures of an endpoint after `after` (all when `None`), oldest first, bodies over 64 KiB left out.
pub async fn captures_after(
    pool: &PgPool,
    webhook_id: WebhookId,
    after: Option<CaptureId>,
    limit: i64,
) -> ApiResult<Vec<LiveEvent>> {
    let rows: Vec<CaptureRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {CAPTURE_COLUMNS_INLINE} FROM captures WHERE webhook_id = $1 AND ($2::uuid IS NULL OR id > $2)
         ORDER BY id LIMIT $3"
    )))
    .bind(webhook_id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|row| Ok(LiveEvent { id: row.id, data: event_json(row.into())? })).collect()
}

impl StreamHub {
    pub fn new(pool: PgPool, replica: Uuid, shutdown: CancellationToken, buffer: usize) -> Arc<Self> {
        Arc::new(Self { pool, replica, topics: Mutex::default(), shutdown, buffer: buffer.max(1) })
    }

    /// Subscribes to an endpoint's captures stored from now on.
    pub async fn subscribe(
        self: &Arc<Self>,
        webhook_id: WebhookId,
    ) -> Result<broadcast::Receiver<Arc<LiveEvent>>, sqlx::Error> {
        let (topic, receiver, created) = {
            let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
            match topics.get(&webhook_id) {
                Some(topic) => (topic.clone(), topic.sender.subscribe(), false),
                None => {
                    let (sender, receiver) = broadcast::channel(self.buffer);
                    let topic = Arc::new(Topic { sender, wake: Notify::new() });
                    topics.insert(webhook_id, topic.clone());
                    (topic, receiver, true)
                }
            }
        };
        if created {
            self.watch(webhook_id).await;
            // Read after the topic exists: a NOTIFY from here on leaves a wake-up for the pump.
            let latest: Option<CaptureId> =
                sqlx::query_scalar("SELECT id FROM captures WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1")
                    .bind(webhook_id)
                    .fetch_optional(&self.pool)
                    .await
                    .inspect_err(|_| {
                        self.retire(webhook_id, &topic);
                    })?;
            tokio::spawn(self.clone().pump(webhook_id, topic, latest));
        }
        Ok(receiver)
    }

    /// A capture for `webhook_id` was stored somewhere.
    pub fn wake(&self, webhook_id: WebhookId) {
        if let Some(topic) = self.topics.lock().unwrap_or_else(|e| e.into_inner()).get(&webhook_id) {
            topic.wake.notify_one();
        }
    }

    /// Notifications may have been lost: every topic looks for new rows.
    pub fn wake_all(&self) {
        for topic in self.topics.lock().unwrap_or_else(|e| e.into_inner()).values() {
            topic.wake.notify_one();
        }
    }

    /// Records (or refreshes) this replica's watch of an endpoint (the topic's re-checks cover a failure).
    async fn watch(&self, webhook_id: WebhookId) {
        crate::db::watch::record(&self.pool, Watch::Captures { webhook_id }, self.replica).await;
    }

    /// Removes the topic if it is still this one and nobody listens (and then its watch).
    fn retire(&self, webhook_id: WebhookId, topic: &Arc<Topic>) -> bool {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let current = topics.get(&webhook_id).is_some_and(|t| Arc::ptr_eq(t, topic));
        if current && topic.sender.receiver_count() == 0 {
            topics.remove(&webhook_id);
            let (pool, replica) = (self.pool.clone(), self.replica);
            tokio::spawn(async move { crate::db::watch::forget_captures(&pool, webhook_id, replica).await });
            return true;
        }
        !current
    }

    async fn pump(self: Arc<Self>, webhook_id: WebhookId, topic: Arc<Topic>, mut last: Option<CaptureId>) {
        let (mut recheck, mut watched_at) = (FIRST_RECHECK, tokio::time::Instant::now());
        loop {
            tokio::select! {
                () = topic.wake.notified() => {}
                () = tokio::time::sleep(recheck) => recheck = RECHECK,
                () = self.shutdown.cancelled() => return,
            }
            if self.retire(webhook_id, &topic) {
                return;
            }
            if watched_at.elapsed() >= WATCH_REFRESH {
                self.watch(webhook_id).await;
                watched_at = tokio::time::Instant::now();
            }
            loop {
                match captures_after(&self.pool, webhook_id, last, FETCH).await {
                    Ok(events) => {
                        let full = events.len() as i64 == FETCH;
                        for event in events {
                            last = Some(event.id);
                            let _ = topic.sender.send(Arc::new(event));
                        }
                        if !full {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, %webhook_id, "stream fetch failed; retrying on the next wake-up");
                        break;
                    }
                }
            }
        }
    }
}

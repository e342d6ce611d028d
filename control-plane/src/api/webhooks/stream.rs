//! `GET /webhooks/{id}/stream`: server-sent events of captures as they arrive. With `Last-Event-ID` the stream
//! first replays what was stored after that event, then goes live without gap or duplicate. A subscriber that
//! falls behind gets `{"type": "stream.lagged", "missed": N}` and may reconnect with its last event id.

use crate::api::context::Ctx;
use crate::api::webhooks::endpoints::ensure_exists;
use crate::auth::scope;
use crate::capture::hub::{LiveEvent, captures_after};
use crate::error::ApiResult;
use crate::extract::{ApiPath, Id};
use crate::http::limits::StreamSlot;
use crate::state::AppState;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt as _};
use hookflow_shared::wire::{LastEventIdHeader, header};
use hookflow_shared::{CaptureId, WebhookId};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast;

const REPLAY_PAGE: i64 = 500;

enum Phase {
    /// Replaying stored captures after this id.
    Replay(CaptureId),
    Live,
}

struct Subscriber {
    app: AppState,
    webhook_id: WebhookId,
    live: broadcast::Receiver<Arc<LiveEvent>>,
    phase: Phase,
    pending: VecDeque<Event>,
    /// The newest capture sent: live events at or before it are duplicates of the replay.
    sent: Option<CaptureId>,
    /// This stream's place in its key's allowance, given back when the stream ends.
    _slot: StreamSlot,
}

fn capture_event(event: &LiveEvent) -> Event {
    Event::default().id(event.id.to_string()).data(&event.data)
}

impl Subscriber {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            match self.phase {
                Phase::Replay(after) => {
                    match captures_after(&self.app.pool, self.webhook_id, Some(after), REPLAY_PAGE).await {
                        Ok(events) => {
                            if (events.len() as i64) < REPLAY_PAGE {
                                self.phase = Phase::Live;
                            }
                            if let Some(last) = events.last() {
                                self.sent = Some(last.id);
                                if let Phase::Replay(_) = self.phase {
                                    self.phase = Phase::Replay(last.id);
                                }
                            }
                            self.pending.extend(events.iter().map(capture_event));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "stream replay failed; closing the stream");
                            return None;
                        }
                    }
                }
                Phase::Live => match self.live.recv().await {
                    Ok(event) if self.sent.is_some_and(|sent| event.id <= sent) => {}
                    Ok(event) => {
                        self.sent = Some(event.id);
                        return Some((Ok(capture_event(&event)), self));
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        let data = serde_json::json!({"type": "stream.lagged", "missed": missed}).to_string();
                        return Some((Ok(Event::default().data(data)), self));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }
}

/// Live stream (SSE) of captures; resumes after `Last-Event-ID`.
#[utoipa::path(get, operation_id = "stream_webhook_requests", path = "/webhooks/{id}/stream", params(Id, LastEventIdHeader),
    responses((status = 200, description = "text/event-stream of `request.captured` and `stream.lagged` events",
            body = hookflow_shared::api::documents::CaptureEventStream, content_type = "text/event-stream")))]
pub async fn stream_requests(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath(id): ApiPath<WebhookId>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let slot = app.allowances.open_stream(caller.credential_id())?;
    let resume = headers
        .get(header::LAST_EVENT_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<CaptureId>().ok());
    // Subscribe before replaying, so nothing stored during the replay is missed.
    let live = app.hub.subscribe(id).await?;
    let shutdown = app.shutdown.clone();
    let keep_alive = app.settings.stream_keep_alive;
    let subscriber = Subscriber {
        app,
        webhook_id: id,
        live,
        phase: resume.map_or(Phase::Live, Phase::Replay),
        pending: VecDeque::new(),
        sent: resume,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(subscriber, Subscriber::next).take_until(shutdown.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive")))
}

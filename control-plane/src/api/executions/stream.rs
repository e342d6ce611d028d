//! `GET /flows/{flow_id}/executions/{execution_id}/stream`: the execution's events as server-sent events. Every
//! event is read from the stored log (so late subscribers get the replay and `Last-Event-ID` resumes exactly);
//! NOTIFY wakes the reader (the stream marks its execution as watched, so its transitions notify), with a
//! 15-second re-check as a safety net. The stream ends after `execution.completed`.

use crate::api::context::Ctx;
use crate::api::executions::path::ExecutionPath;
use crate::auth::Caller;
use crate::auth::scope;
use crate::error::ApiResult;
use crate::http::limits::StreamSlot;
use crate::queue::events;
use crate::queue::row::fetch;
use crate::state::AppState;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt as _};
use hookflow_shared::wire::{LastEventIdHeader, header};
use hookflow_shared::{ExecutionId, FlowId};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::broadcast;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_execution))
}

const PAGE: i64 = 500;
/// A safety net under the wake-ups (NOTIFY reaches every replica): a quiet execution costs a query per interval.
const RECHECK: Duration = Duration::from_secs(15);

struct Reader {
    app: AppState,
    execution_id: ExecutionId,
    wakes: broadcast::Receiver<ExecutionId>,
    last: i32,
    pending: VecDeque<(i32, String)>,
    done: bool,
    /// This stream's place in its key's allowance, given back when the stream ends.
    _slot: StreamSlot,
    /// The execution NOTIFYs while this stands.
    _watching: events::Watching,
}

impl Reader {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some((seq, data)) = self.pending.pop_front() {
                if is_final(&data) {
                    self.done = true;
                }
                return Some((Ok(Event::default().id(seq.to_string()).data(data)), self));
            }
            if self.done {
                return None;
            }
            match events::after(&self.app.pool, self.execution_id, self.last, PAGE).await {
                Ok(rows) if !rows.is_empty() => {
                    self.last = rows.last().map_or(self.last, |(seq, _)| *seq);
                    self.pending.extend(rows);
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "execution stream read failed; closing the stream");
                    return None;
                }
            }
            let (wakes, mine) = (&mut self.wakes, self.execution_id);
            let wait = async {
                loop {
                    match wakes.recv().await {
                        Ok(id) if id != mine => {}
                        Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                        _ => return,
                    }
                }
            };
            let _ = tokio::time::timeout(RECHECK, wait).await;
        }
    }
}

/// Whether an event is the last one (`execution.completed`); events are written by Rust and by SQL, so the
/// JSON is parsed rather than matched as text.
fn is_final(data: &str) -> bool {
    data.contains("execution.completed")
        && serde_json::from_str::<serde_json::Value>(data).is_ok_and(|v| v["type"] == "execution.completed")
}

/// Live events of an execution (SSE); connecting after the end replays everything and closes.
#[utoipa::path(get, path = "/flows/{flow_id}/executions/{execution_id}/stream",
    params(ExecutionPath, LastEventIdHeader),
    responses((status = 200, description = "text/event-stream of `execution.status`, `node.started`, `node.completed` \
            and a final `execution.completed`", body = hookflow_shared::api::documents::ExecutionEventStream,
            content_type = "text/event-stream")))]
async fn stream_execution(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionPath { flow_id, execution_id }: ExecutionPath,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    open(app, &caller, Some(flow_id), execution_id, headers).await
}

/// The stream of an execution (of the flow `flow_id`, or any of the organization's).
pub async fn open(
    app: AppState,
    caller: &Caller<scope::FlowsRead>,
    flow_id: Option<FlowId>,
    execution_id: ExecutionId,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>> {
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, flow_id, execution_id).await?;
    drop(conn);
    let slot = app.allowances.open_stream(caller.credential_id())?;
    let last = headers
        .get(header::LAST_EVENT_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(0)
        .max(0);
    // Subscribe and mark the execution as watched before the first read, so nothing appended in between is missed.
    let wakes = app.execution_wakes.subscribe();
    let watching = events::watch(&app.pool, execution_id).await?;
    let shutdown = app.shutdown.clone();
    let keep_alive = app.settings.stream_keep_alive;
    let reader = Reader {
        app,
        execution_id,
        wakes,
        last,
        pending: VecDeque::new(),
        done: false,
        _slot: slot,
        _watching: watching,
    };
    let stream = futures_util::stream::unfold(reader, Reader::next).take_until(shutdown.cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive")))
}

//! Following a server-sent-events stream that survives dropped connections: after a drop it reconnects with
//! `Last-Event-ID` (so nothing is missed or repeated), backing off between attempts, and gives up only after
//! [`GIVE_UP_AFTER`] without a connection. A stream silent for longer than three keep-alive periods counts as dropped.

use crate::api::Api;
use crate::error::CliError;
use eventsource_stream::{Event, EventStreamError, Eventsource as _};
use futures_util::{Stream, StreamExt as _};
use hookflow_shared::wire::header;
use reqwest::Method;
use serde_json::Value;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

/// How long reconnecting may go on before the stream is given up.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
/// Longer than this without a byte (the server sends a keep-alive every 15 s) means the connection is dead.
const SILENCE_LIMIT: Duration = Duration::from_secs(45);

type Events = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

/// One event: its id and its JSON payload.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    pub id: String,
    pub data: Value,
}

/// Told when the connection drops and when it comes back.
pub type Notice = Box<dyn Fn(&str) + Send + Sync>;

pub struct EventStream {
    api: Api,
    path: String,
    last_id: Option<String>,
    events: Option<Events>,
    notice: Notice,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("path", &self.path).field("last_id", &self.last_id).finish_non_exhaustive()
    }
}

impl EventStream {
    /// A stream of `path` that resumes after `last_id` if given. Connecting happens on the first `next`.
    pub fn new(api: Api, path: String, last_id: Option<String>, notice: Notice) -> Self {
        Self { api, path, last_id, events: None, notice }
    }

    /// Connects now (rather than on the first `next`), so the caller knows the stream is live.
    pub async fn open(&mut self) -> Result<(), CliError> {
        self.reconnect(false).await
    }

    /// Drops the connection; the next `next` reconnects after the last event (to catch up after `stream.lagged`).
    pub fn reconnect_soon(&mut self) {
        self.events = None;
    }

    async fn connect(&self) -> Result<Events, CliError> {
        let mut request = self.api.request(Method::GET, &self.path).header("accept", "text/event-stream");
        if let Some(id) = &self.last_id {
            request = request.header(header::LAST_EVENT_ID, id);
        }
        let response = self.api.send_raw(request).await?;
        Ok(Box::pin(response.bytes_stream().eventsource()))
    }

    /// Connects, retrying transient failures with backoff until [`GIVE_UP_AFTER`].
    async fn reconnect(&mut self, dropped: bool) -> Result<(), CliError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(200);
        loop {
            match self.connect().await {
                Ok(events) => {
                    if dropped {
                        (self.notice)("reconnected");
                    }
                    self.events = Some(events);
                    return Ok(());
                }
                Err(e) if e.is_transient() && started.elapsed() < GIVE_UP_AFTER => {
                    (self.notice)(&format!("{e}; retrying in {} ms", delay.as_millis()));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The next event, reconnecting as often as needed.
    pub async fn next(&mut self) -> Result<StreamEvent, CliError> {
        let mut dropped = self.events.is_none() && self.last_id.is_some();
        loop {
            let Some(events) = self.events.as_mut() else {
                self.reconnect(dropped).await?;
                continue;
            };
            let why = match tokio::time::timeout(SILENCE_LIMIT, events.next()).await {
                Ok(Some(Ok(event))) => {
                    if event.data.is_empty() {
                        continue;
                    }
                    if !event.id.is_empty() {
                        self.last_id = Some(event.id.clone());
                    }
                    let data = serde_json::from_str(&event.data)
                        .map_err(|e| CliError::Network(format!("the stream sent an event that is not JSON ({e})")))?;
                    return Ok(StreamEvent { id: event.id, data });
                }
                Ok(Some(Err(e))) => format!("the stream broke ({e})"),
                Ok(None) => "the server closed the stream".to_owned(),
                Err(_) => format!("nothing heard for {} s", SILENCE_LIMIT.as_secs()),
            };
            self.events = None;
            dropped = true;
            let resume = self.last_id.as_deref().map_or_else(String::new, |id| format!("; resuming after event {id}"));
            (self.notice)(&format!("{why}{resume}"));
        }
    }
}

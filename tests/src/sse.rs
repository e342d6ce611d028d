//! A server-sent-events reader for the tests: opens a stream as the admin and reads events line by line,
//! checking the contract's wire format.

use crate::TestApp;
use futures_util::StreamExt as _;
use hookflow_shared::wire::header;
use serde_json::Value;
use std::time::Duration;

/// An open SSE connection, read line by line.
pub struct Sse {
    lines: std::pin::Pin<Box<dyn futures_util::Stream<Item = String> + Send>>,
}

/// One event: its `id:` (if any) and parsed `data:`.
#[derive(Debug)]
pub struct Event {
    pub id: Option<String>,
    pub data: Value,
}

impl std::fmt::Debug for Sse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sse")
    }
}

impl Sse {
    /// Opens `path` as the app's admin, resuming after `last_event_id` if given.
    pub async fn open(app: &TestApp, path: &str, last_event_id: Option<&str>) -> Self {
        let mut request = app
            .client
            .get(app.url(path))
            .header(header::API_KEY, &app.admin.key)
            .header(header::ORGANIZATION, app.admin.org.to_string());
        if let Some(id) = last_event_id {
            request = request.header(header::LAST_EVENT_ID, id);
        }
        let response = request.send().await.expect("open stream");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut buffer = String::new();
        let bytes = response.bytes_stream();
        let lines = bytes
            .map(move |chunk| {
                buffer.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
                let mut lines = Vec::new();
                while let Some(end) = buffer.find('\n') {
                    lines.push(buffer[..end].to_owned());
                    buffer.drain(..=end);
                }
                futures_util::stream::iter(lines)
            })
            .flatten();
        Self { lines: Box::pin(lines) }
    }

    pub async fn line(&mut self) -> String {
        self.next_line().await.expect("stream open")
    }

    /// The next line, or `None` when the server closed the stream.
    pub async fn next_line(&mut self) -> Option<String> {
        tokio::time::timeout(Duration::from_secs(20), self.lines.next()).await.expect("a line within 20 s")
    }

    /// Every event until the server closes the stream.
    pub async fn until_closed(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut id = None;
        while let Some(line) = self.next_line().await {
            if let Some(value) = line.strip_prefix("id:") {
                id = Some(value.trim().to_owned());
            } else if let Some(data) = line.strip_prefix("data:") {
                events.push(Event { id: id.take(), data: serde_json::from_str(data.trim()).expect("one-line JSON") });
            } else {
                assert!(line.is_empty() || line.starts_with(':'), "unexpected line {line:?}");
            }
        }
        events
    }

    /// The next event, checking the wire format: `id:` then one `data:` line then a blank line, no `event:`.
    pub async fn event(&mut self) -> Event {
        let mut id = None;
        loop {
            let line = self.line().await;
            if line.starts_with(':') || line.is_empty() {
                continue;
            }
            assert!(!line.starts_with("event:"), "no event: field");
            if let Some(value) = line.strip_prefix("id:") {
                id = Some(value.trim().to_owned());
                continue;
            }
            let data =
                line.strip_prefix("data:").unwrap_or_else(|| panic!("unexpected line {line:?}")).trim().to_owned();
            assert_eq!(self.line().await, "", "one data line per event");
            return Event { id, data: serde_json::from_str(&data).expect("one-line JSON") };
        }
    }

    /// Asserts nothing arrives for a moment (comments aside).
    pub async fn quiet(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(700);
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.lines.next()).await {
            assert!(line.is_empty() || line.starts_with(':'), "unexpected {line:?}");
        }
    }
}

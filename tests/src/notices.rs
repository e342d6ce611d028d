//! NOTIFY payloads as a test hears them: a LISTEN on the test's database, read in the order PostgreSQL delivers
//! them (commit order).

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use std::time::Duration;

#[derive(Debug)]
pub struct Notices(PgListener);

impl Notices {
    /// Listens on `channel` from now on.
    pub async fn listen(pool: &PgPool, channel: &str) -> Self {
        let mut listener = PgListener::connect_with(pool).await.expect("listener");
        listener.listen(channel).await.expect("listen");
        Self(listener)
    }

    /// The next payload (within 10 s).
    pub async fn next(&mut self) -> String {
        let notice = tokio::time::timeout(Duration::from_secs(10), self.0.recv()).await.expect("a NOTIFY in 10 s");
        notice.expect("listener").payload().to_owned()
    }
}

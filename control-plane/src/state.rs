//! `AppState`: what every handler can reach — the pool and the settings that shape answers.

use sqlx::PgPool;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
pub struct Inner {
    pub pool: PgPool,
    pub settings: Settings,
}

/// Settings that handlers read; built once at startup.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL clients reach the server at, without a trailing slash (capture URLs are built from it).
    pub public_url: String,
}

impl AppState {
    pub fn new(pool: PgPool, settings: Settings) -> Self {
        Self(Arc::new(Inner { pool, settings }))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

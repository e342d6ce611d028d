//! A value bound as PostgreSQL `json` (text kept as written), not sqlx's default `jsonb` (which re-orders keys):
//! for the columns that keep what their author wrote, flow definitions above all.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo};
use sqlx::{Encode, Postgres, Type};

/// `value` bound as `json`: serialized by serde_json in its own key order (the workspace builds serde_json with
/// `preserve_order`, so a parsed definition keeps its author's).
#[derive(Debug, Clone, Copy)]
pub struct JsonText<T>(pub T);

impl<T> Type<Postgres> for JsonText<T> {
    fn type_info() -> PgTypeInfo {
        // `json`, by its fixed oid (pg_type.dat).
        PgTypeInfo::with_oid(Oid(114))
    }
}

impl<T: serde::Serialize> Encode<'_, Postgres> for JsonText<T> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        // The binary form of `json` is its text.
        serde_json::to_writer(&mut **buf, &self.0)?;
        Ok(IsNull::No)
    }
}

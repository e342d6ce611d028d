//! PATCH statements: an `UPDATE` of one row that sets only what a body names (`Patch<T>`: keep, clear, set;
//! `Option<T>`: keep or set), every value a bound parameter, the row found by its organization and id.

use hookflow_shared::OrgId;
use hookflow_shared::api::Patch;
use sqlx::{Encode, PgConnection, Postgres, QueryBuilder, Type};

pub struct Update {
    builder: QueryBuilder<Postgres>,
    assignments: usize,
}

impl std::fmt::Debug for Update {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Update").field("sql", &self.builder.sql()).finish_non_exhaustive()
    }
}

impl Update {
    pub fn new(table: &'static str) -> Self {
        Self { builder: QueryBuilder::new(format!("UPDATE {table} SET ")), assignments: 0 }
    }

    fn column(&mut self, column: &'static str) {
        if self.assignments > 0 {
            self.builder.push(", ");
        }
        self.assignments += 1;
        self.builder.push(column).push(" = ");
    }

    /// `column = value`.
    pub fn set<T>(mut self, column: &'static str, value: T) -> Self
    where
        T: for<'t> Encode<'t, Postgres> + Type<Postgres>,
    {
        self.column(column);
        self.builder.push_bind(value);
        self
    }

    /// `column = value` when there is one; nothing otherwise.
    pub fn set_some<T>(self, column: &'static str, value: Option<T>) -> Self
    where
        T: for<'t> Encode<'t, Postgres> + Type<Postgres>,
    {
        match value {
            Some(value) => self.set(column, value),
            None => self,
        }
    }

    /// Keep, `column = NULL`, or `column = value`.
    pub fn patch<T>(self, column: &'static str, patch: Patch<T>) -> Self
    where
        T: for<'t> Encode<'t, Postgres> + Type<Postgres>,
    {
        match patch {
            Patch::Keep => self,
            Patch::Clear => self.sql(column, "NULL"),
            Patch::Set(value) => self.set(column, value),
        }
    }

    /// `column = <sql>`, for expressions such as `now()` or `draft_revision + 1`.
    pub fn sql(mut self, column: &'static str, sql: &'static str) -> Self {
        self.column(column);
        self.builder.push(sql);
        self
    }

    /// Runs the update on the row `id` of `org_id` (`id` alone names the organization row itself when `table`
    /// is `organizations`); returns the number of rows changed.
    pub async fn execute<K>(mut self, conn: &mut PgConnection, org_id: OrgId, id: K) -> Result<u64, sqlx::Error>
    where
        K: for<'t> Encode<'t, Postgres> + Type<Postgres>,
    {
        if self.assignments == 0 {
            // Nothing to change: the row is still looked for, so a missing one answers 404.
            self.column("id");
            self.builder.push("id");
        }
        self.builder.push(" WHERE organization_id = ").push_bind(org_id).push(" AND id = ").push_bind(id);
        Ok(self.builder.build().execute(conn).await?.rows_affected())
    }

    /// Runs the update on the organization row `org_id`.
    pub async fn execute_organization(mut self, conn: &mut PgConnection, org_id: OrgId) -> Result<u64, sqlx::Error> {
        if self.assignments == 0 {
            self.column("id");
            self.builder.push("id");
        }
        self.builder.push(" WHERE id = ").push_bind(org_id);
        Ok(self.builder.build().execute(conn).await?.rows_affected())
    }
}

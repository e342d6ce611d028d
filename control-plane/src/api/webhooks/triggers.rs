//! An endpoint's `triggers` as written: who may set them (`flows:execute` too: a trigger launches flows), and each
//! checked against the caller's organization (its flow, environment and published version) with its `q`,
//! `filter` and names, every refusal naming the field (`triggers[1].q`). A flow of another organization is
//! refused exactly as a missing one.

use crate::api::webhooks::search::{self, Cond};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use hookflow_shared::api::rules::is_key;
use hookflow_shared::api::triggers::{TRIGGER_Q_MAX, WebhookTrigger, shadowed_name};
use hookflow_shared::flow::definition::VersionSelector;
use hookflow_shared::{OrgId, Scope};
use sqlx::PgPool;

/// Refuses triggers the caller may not set or that could never launch as written.
pub async fn check<S>(pool: &PgPool, caller: &Caller<S>, triggers: &[WebhookTrigger]) -> ApiResult<()> {
    if triggers.is_empty() {
        return Ok(());
    }
    caller.require(Scope::FlowsExecute)?;
    for (i, trigger) in triggers.iter().enumerate() {
        let field = |name: &str| format!("triggers[{i}].{name}");
        check_target(pool, caller.org_id, trigger, &field).await?;
        let conds = conditions(trigger, &field)?;
        search::check_json_paths(pool, &conds).await.map_err(|e| named(e, &field("filter")))?;
        if let Some(name) = shadowed_name(trigger) {
            return Err(ApiError::invalid(format!(
                "invalid field `{}`: `{name}` is also extracted; one would hide the other",
                field("variables")
            )));
        }
    }
    Ok(())
}

/// The search conditions a capture must meet for `trigger` to launch (none: every capture).
pub fn conditions(trigger: &WebhookTrigger, field: &(dyn Fn(&str) -> String + Sync)) -> ApiResult<Vec<Cond>> {
    let mut conds = match &trigger.filter {
        Some(filter) => search::from_filter(filter).map_err(|e| named(e, &field("filter")))?,
        None => Vec::new(),
    };
    if let Some(q) = &trigger.q {
        if q.chars().count() > TRIGGER_Q_MAX {
            return Err(ApiError::invalid(format!("`{}` must be at most {TRIGGER_Q_MAX} characters", field("q"))));
        }
        conds.extend(search::from_text(q).map_err(|e| named(e, &field("q")))?);
    }
    search::check_conditions(&conds).map_err(|e| named(e, &field("q")))?;
    Ok(conds)
}

/// A refusal of the search machinery, naming the trigger's field (other errors stay as they are).
fn named(error: ApiError, field: &str) -> ApiError {
    if error.code == hookflow_shared::ErrorCode::InvalidRequest {
        ApiError::invalid(format!("invalid field `{field}`: {}", error.message))
    } else {
        error
    }
}

/// The flow, environment and version a trigger names exist in the organization.
async fn check_target(
    pool: &PgPool,
    org_id: OrgId,
    trigger: &WebhookTrigger,
    field: &(dyn Fn(&str) -> String + Sync),
) -> ApiResult<()> {
    let flow: Option<(bool, bool)> = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM flow_environments e
                        WHERE e.organization_id = f.organization_id AND e.flow_id = f.id AND e.key = $3),
                EXISTS (SELECT 1 FROM flow_versions v WHERE v.flow_id = f.id AND ($4::int IS NULL OR v.version = $4))
         FROM flows f WHERE f.organization_id = $1 AND f.id = $2",
    )
    .bind(org_id)
    .bind(trigger.flow_id)
    .bind(trigger.environment.as_deref())
    .bind(version_number(trigger.version, field)?)
    .fetch_optional(pool)
    .await?;
    let Some((environment_found, version_found)) = flow else {
        return Err(ApiError::invalid(format!("invalid field `{}`: no flow with this id", field("flow_id"))));
    };
    if let Some(key) = &trigger.environment
        && (!is_key(key, 64) || !environment_found)
    {
        return Err(ApiError::invalid(format!(
            "invalid field `{}`: the flow has no environment `{key}`",
            field("environment")
        )));
    }
    if trigger.version.is_some() && !version_found {
        return Err(ApiError::invalid(format!(
            "invalid field `{}`: the flow has no such published version",
            field("version")
        )));
    }
    Ok(())
}

/// A version number a launch can name (1 to `i32::MAX`); `None` for the draft or the newest.
fn version_number(version: Option<VersionSelector>, field: &(dyn Fn(&str) -> String + Sync)) -> ApiResult<Option<i32>> {
    match version {
        Some(VersionSelector::Number(n)) => match i32::try_from(n) {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(ApiError::invalid(format!(
                "invalid field `{}`: {n} is not a version number (1 or more)",
                field("version")
            ))),
        },
        _ => Ok(None),
    }
}

//! The draft of a flow: create, list (tag filter, text), search, tags with counts, read, replace, patch,
//! delete, and validation of the stored draft (including references to other flows).

use crate::api::context::Ctx;
use crate::api::flows::model::{
    FLOW_COLUMNS, FlowRow, NewFlow, check_definition, check_endpoint_reads, check_schedule, fetch, insert_flow,
    name_taken,
};
use crate::auth::scope;
use crate::db::json_text::JsonText;
use crate::db::owned::{self, Owned};
use crate::db::update::Update;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiQuery, Id};
use crate::pagination::{self, ListParams, Listed, PageRequest};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::fields::{ShortText, Tags};
use hookflow_shared::api::flows::{
    Flow, PatchFlow, SearchFlows, TagCount, TagList, ValidateDefinition, Validation, WriteFlow,
};
use hookflow_shared::api::{Page, Patch};
use hookflow_shared::flow::definition::{self, Node, Problem, VersionSelector};
use hookflow_shared::{FlowId, OrgId};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_flows, create_flow))
        .routes(routes!(search_flows))
        .routes(routes!(list_tags))
        .routes(routes!(get_flow, replace_flow, patch_flow, delete_flow))
        .routes(routes!(validate_flow))
        .routes(routes!(validate_definition))
}

/// Create a flow; the definition is validated first.
#[utoipa::path(post, path = "/flows", request_body = WriteFlow, responses((status = 201, body = Flow), (status = 409),
    (status = 403, description = "`quota_exceeded`: the organization's `flows` quota is reached")))]
async fn create_flow(Ctx { app, caller }: Ctx<scope::FlowsWrite>, ApiJson(body): ApiJson<WriteFlow>) -> Created<Flow> {
    let tags = body.tags.distinct();
    check_schedule(body.schedule.as_deref())?;
    check_definition(&body.definition)?;
    check_endpoint_reads(&caller, "saving", std::iter::once(&body.definition))?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    crate::api::collections::refs::check(&mut tx, caller.org_id, &body.definition).await?;
    let new = NewFlow {
        org_id: caller.org_id,
        name: body.name.as_str(),
        description: body.description.as_deref(),
        tags: &tags,
        definition: &body.definition,
        schedule: body.schedule.as_deref(),
        key: body.key.as_ref().map(|k| k.as_str()),
        managed: body.managed.unwrap_or(false),
        quotas: app.settings.quotas,
    };
    let id = insert_flow(&mut tx, new).await?;
    let flow = fetch(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(flow)))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FlowListParams {
    /// Only flows carrying this tag.
    pub tag: Option<String>,
    /// Text in the name or description.
    pub q: Option<String>,
    /// **Added:** only the flow with this key.
    pub key: Option<String>,
    /// Items per page: default 50, values above 100 are clamped to 100.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

struct Filter<'a> {
    tags: &'a [String],
    q: Option<&'a str>,
    last_status: Option<&'a str>,
    key: Option<&'a str>,
}

async fn query_flows(
    app: &AppState,
    org_id: OrgId,
    filter: Filter<'_>,
    page: &PageRequest<FlowId>,
) -> ApiResult<Page<Flow>> {
    let rows: Vec<FlowRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {FLOW_COLUMNS} FROM flows f
         WHERE f.organization_id = $1 AND f.tags @> $2
           AND ($3::text IS NULL OR strpos(lower(f.name || ' ' || COALESCE(f.description, '')), lower($3)) > 0)
           AND ($4::text IS NULL
                OR (SELECT x.status FROM executions x WHERE x.flow_id = f.id ORDER BY x.id DESC LIMIT 1) = $4)
           AND ($5::uuid IS NULL OR f.id < $5)
           AND ($7::text IS NULL OR f.key = $7)
         ORDER BY f.id DESC LIMIT $6"
    )))
    .bind(org_id)
    .bind(filter.tags)
    .bind(filter.q)
    .bind(filter.last_status)
    .bind(page.after)
    .bind(page.fetch_limit())
    .bind(filter.key)
    .fetch_all(&app.pool)
    .await?;
    let flows = rows.into_iter().map(Flow::try_from).collect::<Result<Vec<_>, _>>()?;
    pagination::finish(flows, page, |f| f.id)
}

/// List flows, newest first; filter by tag and text.
#[utoipa::path(get, path = "/flows", params(FlowListParams), responses((status = 200, body = Page<Flow>)))]
async fn list_flows(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiQuery(params): ApiQuery<FlowListParams>,
) -> Listed<Flow> {
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page::<FlowId>()?;
    let tags: Vec<String> = params.tag.into_iter().collect();
    let filter = Filter { tags: &tags, q: params.q.as_deref(), last_status: None, key: params.key.as_deref() };
    Ok(Json(query_flows(&app, caller.org_id, filter, &page).await?))
}

/// Search flows by text, tags (all of them) and last execution status.
#[utoipa::path(post, path = "/flows/search", request_body = SearchFlows, responses((status = 200, body = Page<Flow>)))]
async fn search_flows(Ctx { app, caller }: Ctx<scope::FlowsRead>, ApiJson(body): ApiJson<SearchFlows>) -> Listed<Flow> {
    let page = ListParams { limit: body.limit, cursor: body.cursor.clone() }.page::<FlowId>()?;
    let filter =
        Filter { tags: &body.tags, q: body.q.as_deref(), last_status: body.last_status.map(|s| s.as_str()), key: None };
    Ok(Json(query_flows(&app, caller.org_id, filter, &page).await?))
}

/// Every tag in use with how many flows carry it.
#[utoipa::path(get, operation_id = "list_flow_tags", path = "/flows/tags", responses((status = 200, body = TagList)))]
async fn list_tags(Ctx { app, caller }: Ctx<scope::FlowsRead>) -> ApiResult<Json<TagList>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT tag, count(*) FROM flows, unnest(tags) AS tag WHERE organization_id = $1 GROUP BY tag ORDER BY 2 DESC, 1",
    )
    .bind(caller.org_id)
    .fetch_all(&app.pool)
    .await?;
    Ok(Json(TagList { items: rows.into_iter().map(|(tag, count)| TagCount { tag, count }).collect() }))
}

/// Read a flow.
#[utoipa::path(get, path = "/flows/{id}", params(Id), responses((status = 200, body = Flow)))]
async fn get_flow(Ctx { app, caller }: Ctx<scope::FlowsRead>, Id(id): Id<FlowId>) -> ApiResult<Json<Flow>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch(&mut conn, caller.org_id, id).await?))
}

/// Replace name, description, tags, definition and schedule; `draft_revision` increments.
#[utoipa::path(put, path = "/flows/{id}", params(Id), request_body = WriteFlow,
    responses((status = 200, body = Flow), (status = 409)))]
async fn replace_flow(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    Id(id): Id<FlowId>,
    ApiJson(body): ApiJson<WriteFlow>,
) -> ApiResult<Json<Flow>> {
    let patch = PatchFlow {
        name: Some(body.name),
        description: Patch::from_option(body.description),
        tags: Some(body.tags),
        definition: Some(body.definition),
        schedule: Patch::from_option(body.schedule),
        key: body.key.map_or(Patch::Keep, Patch::Set),
        managed: body.managed,
    };
    check_endpoint_reads(&caller, "saving", patch.definition.iter())?;
    update(&app, caller.org_id, id, patch).await.map(Json)
}

/// Change some fields; `draft_revision` increments.
#[utoipa::path(patch, operation_id = "update_flow", path = "/flows/{id}", params(Id), request_body = PatchFlow,
    responses((status = 200, body = Flow), (status = 409)))]
async fn patch_flow(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    Id(id): Id<FlowId>,
    ApiJson(body): ApiJson<PatchFlow>,
) -> ApiResult<Json<Flow>> {
    check_endpoint_reads(&caller, "saving", body.definition.iter())?;
    update(&app, caller.org_id, id, body).await.map(Json)
}

async fn update(app: &AppState, org_id: OrgId, id: FlowId, patch: PatchFlow) -> ApiResult<Flow> {
    let name = patch.name.as_ref().map(|n| n.as_str().to_owned());
    let tags = patch.tags.as_ref().map(Tags::distinct);
    check_schedule(patch.schedule.value().map(String::as_str))?;
    if let Some(definition) = &patch.definition {
        check_definition(definition)?;
    }
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if let Some(definition) = &patch.definition {
        crate::api::collections::refs::check(&mut tx, org_id, definition).await?;
    }
    // The legacy schedule text is mirrored as the flow's legacy schedule row (below, once the flow is found).
    let schedule = (!patch.schedule.is_keep()).then(|| patch.schedule.value().map(|s| s.trim().to_owned()));
    let update = Update::new("flows")
        .set_some("name", name)
        .patch("description", patch.description.map(ShortText::into_inner))
        .set_some("tags", tags)
        .set_some("definition", patch.definition.map(JsonText))
        .patch("schedule", patch.schedule.map(|s| s.trim().to_owned()))
        .patch("key", patch.key.map(|k| k.as_str().to_owned()))
        .set_some("managed", patch.managed);
    let updated = update
        .sql("draft_revision", "draft_revision + 1")
        .sql("updated_at", "now()")
        .execute(&mut tx, org_id, id)
        .await
        .map_err(name_taken)?;
    if updated == 0 {
        return Err(ApiError::not_found("flow"));
    }
    if let Some(schedule) = schedule {
        crate::schedules::store::sync_legacy(&mut tx, org_id, id, schedule.as_deref()).await?;
    }
    let flow = fetch(&mut tx, org_id, id).await?;
    tx.commit().await?;
    Ok(flow)
}

/// Delete a flow with its versions and environments.
#[utoipa::path(delete, path = "/flows/{id}", params(Id), responses((status = 204)))]
async fn delete_flow(Ctx { app, caller }: Ctx<scope::FlowsWrite>, Id(id): Id<FlowId>) -> ApiResult<StatusCode> {
    owned::delete(&app.pool, Owned::Flow, caller.org_id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Check the stored draft, including that module nodes reference published flows of this organization.
#[utoipa::path(post, path = "/flows/{id}/validate", params(Id), responses((status = 200, body = Validation)))]
async fn validate_flow(Ctx { app, caller }: Ctx<scope::FlowsRead>, Id(id): Id<FlowId>) -> ApiResult<Json<Validation>> {
    let mut conn = app.pool.acquire().await?;
    let flow = fetch(&mut conn, caller.org_id, id).await?;
    Ok(Json(problems_of(&mut conn, caller.org_id, Some(id), &flow.definition).await?))
}

/// **Added.** Check a definition that is not stored yet (an editor's), with the same rules as the stored draft's.
#[utoipa::path(post, operation_id = "validate_flow_definition", path = "/flows/validate", request_body = ValidateDefinition,
    responses((status = 200, body = Validation)))]
async fn validate_definition(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiJson(body): ApiJson<ValidateDefinition>,
) -> ApiResult<Json<Validation>> {
    if !body.definition.is_object() {
        return Err(ApiError::invalid("definition: expected a flow definition object"));
    }
    let mut conn = app.pool.acquire().await?;
    Ok(Json(problems_of(&mut conn, caller.org_id, body.flow_id, &body.definition).await?))
}

/// Every problem of `raw`: its own rules, then module nodes that name a flow of this organization without the
/// published version they ask for (or the flow `flow_id` itself).
async fn problems_of(
    conn: &mut sqlx::PgConnection,
    org_id: OrgId,
    flow_id: Option<FlowId>,
    raw: &serde_json::Value,
) -> ApiResult<Validation> {
    let problems = match definition::validate(raw) {
        Err(problems) => problems,
        Ok(parsed) => {
            let mut problems = Vec::new();
            for node in &parsed.nodes {
                let Node::Module(module) = node else { continue };
                let versions: Option<(Option<i32>, bool)> = sqlx::query_as(
                    "SELECT (SELECT max(version) FROM flow_versions v WHERE v.flow_id = f.id),
                            EXISTS (SELECT 1 FROM flow_versions v WHERE v.flow_id = f.id AND v.version = $3)
                     FROM flows f WHERE f.organization_id = $1 AND f.id = $2",
                )
                .bind(org_id)
                .bind(module.flow_id)
                .bind(match module.version {
                    Some(VersionSelector::Number(n)) => i32::try_from(n).unwrap_or(i32::MAX),
                    _ => 0,
                })
                .fetch_optional(&mut *conn)
                .await?;
                let message = match (versions, module.version) {
                    (None, _) => Some(format!("flow {} does not exist in this organization", module.flow_id)),
                    (Some((None, _)), _) => Some(format!("flow {} has no published version", module.flow_id)),
                    (Some((_, false)), Some(VersionSelector::Number(n))) => {
                        Some(format!("flow {} has no published version {n}", module.flow_id))
                    }
                    _ => None,
                };
                if Some(module.flow_id) == flow_id {
                    problems.push(Problem {
                        node_id: Some(module.id.clone()),
                        field: "flow_id".into(),
                        message: "a flow cannot run itself".into(),
                    });
                } else if let Some(message) = message {
                    problems.push(Problem { node_id: Some(module.id.clone()), field: "flow_id".into(), message });
                }
            }
            problems
        }
    };
    Ok(Validation { valid: problems.is_empty(), problems })
}

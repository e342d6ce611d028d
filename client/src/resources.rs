//! The operations, one method each, grouped by resource. Ids are taken as anything that prints as one (a typed id,
//! or a `&str` a test holds); list queries as `(name, value)` pairs.

use crate::{ApiFailure, Client, Webhooks, with_query};
use hookflow_shared::api::Page;
use hookflow_shared::api::admin::{
    ApiKey, AuditEntry, CreateApiKey, CreatedApiKey, Organization, Permissions, UpdateOrganization,
};
use hookflow_shared::api::analytics::{ExecutionStats, Overview};
use hookflow_shared::api::catalog::{
    AssertionResults, EvaluateAssertions, EvaluateExtractor, Extracted, KindList, OperatorList,
};
use hookflow_shared::api::collections::{
    Collection, CollectionDetail, CollectionRequest, ImportOpenApi, ImportedCollection, OpenApiSync, PatchCollection,
    PutOpenApiSync, SyncApplied, SyncDiff, WriteCollection, WriteRequest,
};
use hookflow_shared::api::executions::{
    Execution, Launch, LaunchByTag, LaunchedExecutions, NodeResult, NodeResultList,
};
use hookflow_shared::api::fields::{Email, ValueText};
use hookflow_shared::api::flows::{
    Environment, EnvironmentList, Flow, FlowDocument, FlowVersion, PatchFlow, Publish, PutEnvironment, SearchFlows,
    TagList, TryNode, ValidateDefinition, Validation, WriteFlow,
};
use hookflow_shared::api::people::{
    AcceptInvitation, AddMember, ChangePassword, CreatedInvitation, Jwks, Member, OrganizationRole, Refresh,
    SessionInfo, SessionTokens, SignIn, SignedUp, Signup, UpdateMember,
};
use hookflow_shared::api::resources::{PutSecret, PutValue, SecretInfo, Variable};
use hookflow_shared::api::runners::{
    Complete, Heartbeat, HeartbeatReply, JobBatch, NextJob, RegisterRunner, Registered, ReportReply, Runner,
};
use hookflow_shared::wire::{header, runner_route};
use hookflow_shared::{JobId, RunnerId};
use reqwest::Method;
use std::fmt::Display;

/// A query: `(name, value)` pairs.
pub type Query<'a> = &'a [(&'a str, &'a str)];

impl Client {
    pub fn flows(&self) -> Flows<'_> {
        Flows(self)
    }

    pub fn executions(&self) -> Executions<'_> {
        Executions(self)
    }

    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks::of(self)
    }

    pub fn keys(&self) -> Keys<'_> {
        Keys(self)
    }

    pub fn organization(&self) -> Organizations<'_> {
        Organizations(self)
    }

    pub fn variables(&self) -> Variables<'_> {
        Variables(self)
    }

    pub fn secrets(&self) -> Secrets<'_> {
        Secrets(self)
    }

    pub fn collections(&self) -> Collections<'_> {
        Collections(self)
    }

    pub fn catalog(&self) -> Catalog<'_> {
        Catalog(self)
    }

    pub fn runners(&self) -> Runners<'_> {
        Runners(self)
    }

    pub fn people(&self) -> People<'_> {
        People(self)
    }
}

/// `/flows`: drafts, search, validation, versions, environments, export and import, launches.
#[derive(Debug, Clone, Copy)]
pub struct Flows<'a>(&'a Client);

impl Flows<'_> {
    pub async fn create(&self, flow: &WriteFlow) -> Result<Flow, ApiFailure> {
        self.0.post("/flows", flow).await
    }

    pub async fn list(&self, query: Query<'_>) -> Result<Page<Flow>, ApiFailure> {
        self.0.get(&with_query("/flows", query)).await
    }

    pub async fn get(&self, id: impl Display) -> Result<Flow, ApiFailure> {
        self.0.get(&format!("/flows/{id}")).await
    }

    pub async fn put(&self, id: impl Display, flow: &WriteFlow) -> Result<Flow, ApiFailure> {
        self.0.put(&format!("/flows/{id}"), flow).await
    }

    pub async fn patch(&self, id: impl Display, patch: &PatchFlow) -> Result<Flow, ApiFailure> {
        self.0.patch(&format!("/flows/{id}"), patch).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/flows/{id}")).await
    }

    pub async fn search(&self, search: &SearchFlows) -> Result<Page<Flow>, ApiFailure> {
        self.0.post("/flows/search", search).await
    }

    pub async fn tags(&self) -> Result<TagList, ApiFailure> {
        self.0.get("/flows/tags").await
    }

    /// `POST /flows/{id}/validate`: the stored draft.
    pub async fn validate(&self, id: impl Display) -> Result<Validation, ApiFailure> {
        self.0.post_empty(&format!("/flows/{id}/validate")).await
    }

    /// `POST /flows/validate`: an unsaved definition.
    pub async fn validate_definition(&self, body: &ValidateDefinition) -> Result<Validation, ApiFailure> {
        self.0.post("/flows/validate", body).await
    }

    pub async fn publish(&self, id: impl Display, publish: &Publish) -> Result<FlowVersion, ApiFailure> {
        self.0.post(&format!("/flows/{id}/publish"), publish).await
    }

    pub async fn versions(&self, id: impl Display) -> Result<Page<FlowVersion>, ApiFailure> {
        self.0.get(&format!("/flows/{id}/versions")).await
    }

    pub async fn version(&self, id: impl Display, version_id: impl Display) -> Result<FlowVersion, ApiFailure> {
        self.0.get(&format!("/flows/{id}/versions/{version_id}")).await
    }

    pub async fn restore(&self, id: impl Display, version_id: impl Display) -> Result<Flow, ApiFailure> {
        self.0.post_empty(&format!("/flows/{id}/versions/{version_id}/restore")).await
    }

    pub async fn environments(&self, id: impl Display) -> Result<EnvironmentList, ApiFailure> {
        self.0.get(&format!("/flows/{id}/environments")).await
    }

    pub async fn put_environment(
        &self,
        id: impl Display,
        key: &str,
        environment: &PutEnvironment,
    ) -> Result<Environment, ApiFailure> {
        self.0.put(&format!("/flows/{id}/environments/{key}"), environment).await
    }

    pub async fn delete_environment(&self, id: impl Display, key: &str) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/flows/{id}/environments/{key}")).await
    }

    pub async fn export(&self, id: impl Display) -> Result<FlowDocument, ApiFailure> {
        self.0.get(&format!("/flows/{id}/export")).await
    }

    pub async fn import(&self, document: &FlowDocument) -> Result<Flow, ApiFailure> {
        self.0.post("/flows/import", document).await
    }

    pub async fn launch(&self, id: impl Display, launch: &Launch) -> Result<Execution, ApiFailure> {
        self.0.post(&format!("/flows/{id}/launch"), launch).await
    }

    /// A launch carrying an `Idempotency-Key`.
    pub async fn launch_idempotent(
        &self,
        id: impl Display,
        key: &str,
        launch: &Launch,
    ) -> Result<Execution, ApiFailure> {
        let request = self.0.request(Method::POST, &format!("/flows/{id}/launch"));
        self.0.send(request.header(header::IDEMPOTENCY_KEY, key).json(launch)).await
    }

    /// `POST /flows/launch`: every flow carrying all the tags.
    pub async fn launch_by_tag(&self, launch: &LaunchByTag) -> Result<LaunchedExecutions, ApiFailure> {
        self.0.post("/flows/launch", launch).await
    }

    pub async fn analytics(&self, id: impl Display, query: Query<'_>) -> Result<ExecutionStats, ApiFailure> {
        self.0.get(&with_query(&format!("/flows/{id}/analytics/executions"), query)).await
    }

    /// `POST /flows/{flow_id}/try`: one request node sent now; its result, nothing stored.
    pub async fn try_node(&self, id: impl Display, body: &TryNode) -> Result<NodeResult, ApiFailure> {
        self.0.post(&format!("/flows/{id}/try"), body).await
    }
}

/// `/flows/{flow}/executions`.
#[derive(Debug, Clone, Copy)]
pub struct Executions<'a>(&'a Client);

impl Executions<'_> {
    pub async fn list(&self, flow: impl Display, query: Query<'_>) -> Result<Page<Execution>, ApiFailure> {
        self.0.get(&with_query(&format!("/flows/{flow}/executions"), query)).await
    }

    pub async fn get(&self, flow: impl Display, execution: impl Display) -> Result<Execution, ApiFailure> {
        self.0.get(&format!("/flows/{flow}/executions/{execution}")).await
    }

    pub async fn nodes(&self, flow: impl Display, execution: impl Display) -> Result<NodeResultList, ApiFailure> {
        self.0.get(&format!("/flows/{flow}/executions/{execution}/nodes")).await
    }

    pub async fn cancel(&self, flow: impl Display, execution: impl Display) -> Result<Execution, ApiFailure> {
        self.0.post_empty(&format!("/flows/{flow}/executions/{execution}/cancel")).await
    }
}

/// `/api-keys` and `/permissions`.
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a>(&'a Client);

impl Keys<'_> {
    pub async fn create(&self, key: &CreateApiKey) -> Result<CreatedApiKey, ApiFailure> {
        self.0.post("/api-keys", key).await
    }

    pub async fn list(&self, query: Query<'_>) -> Result<Page<ApiKey>, ApiFailure> {
        self.0.get(&with_query("/api-keys", query)).await
    }

    pub async fn get(&self, id: impl Display) -> Result<ApiKey, ApiFailure> {
        self.0.get(&format!("/api-keys/{id}")).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/api-keys/{id}")).await
    }

    pub async fn permissions(&self) -> Result<Permissions, ApiFailure> {
        self.0.get("/permissions").await
    }
}

/// `/organization`, its audit log and its capture overview.
#[derive(Debug, Clone, Copy)]
pub struct Organizations<'a>(&'a Client);

impl Organizations<'_> {
    pub async fn get(&self) -> Result<Organization, ApiFailure> {
        self.0.get("/organization").await
    }

    pub async fn update(&self, update: &UpdateOrganization) -> Result<Organization, ApiFailure> {
        self.0.patch("/organization", update).await
    }

    pub async fn audit_log(&self, query: Query<'_>) -> Result<Page<AuditEntry>, ApiFailure> {
        self.0.get(&with_query("/audit-log", query)).await
    }

    pub async fn overview(&self, query: Query<'_>) -> Result<Overview, ApiFailure> {
        self.0.get(&with_query("/analytics/overview", query)).await
    }
}

/// `/variables`.
#[derive(Debug, Clone, Copy)]
pub struct Variables<'a>(&'a Client);

impl Variables<'_> {
    pub async fn list(&self, query: Query<'_>) -> Result<Page<Variable>, ApiFailure> {
        self.0.get(&with_query("/variables", query)).await
    }

    pub async fn put(&self, name: &str, value: &ValueText) -> Result<Variable, ApiFailure> {
        self.0.put(&format!("/variables/{name}"), &PutValue { value: value.clone() }).await
    }

    pub async fn delete(&self, name: &str) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/variables/{name}")).await
    }
}

/// `/secrets` (write-only values).
#[derive(Debug, Clone, Copy)]
pub struct Secrets<'a>(&'a Client);

impl Secrets<'_> {
    pub async fn list(&self, query: Query<'_>) -> Result<Page<SecretInfo>, ApiFailure> {
        self.0.get(&with_query("/secrets", query)).await
    }

    pub async fn put(&self, name: &str, secret: &PutSecret) -> Result<SecretInfo, ApiFailure> {
        self.0.put(&format!("/secrets/{name}"), secret).await
    }

    pub async fn delete(&self, name: &str) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/secrets/{name}")).await
    }
}

/// `/collections`: collections, their requests, OpenAPI imports and syncs.
#[derive(Debug, Clone, Copy)]
pub struct Collections<'a>(&'a Client);

impl Collections<'_> {
    pub async fn create(&self, collection: &WriteCollection) -> Result<CollectionDetail, ApiFailure> {
        self.0.post("/collections", collection).await
    }

    pub async fn list(&self, query: Query<'_>) -> Result<Page<Collection>, ApiFailure> {
        self.0.get(&with_query("/collections", query)).await
    }

    pub async fn get(&self, id: impl Display) -> Result<CollectionDetail, ApiFailure> {
        self.0.get(&format!("/collections/{id}")).await
    }

    pub async fn patch(&self, id: impl Display, patch: &PatchCollection) -> Result<CollectionDetail, ApiFailure> {
        self.0.patch(&format!("/collections/{id}"), patch).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/collections/{id}")).await
    }

    pub async fn requests(&self, id: impl Display, query: Query<'_>) -> Result<Page<CollectionRequest>, ApiFailure> {
        self.0.get(&with_query(&format!("/collections/{id}/requests"), query)).await
    }

    pub async fn add_request(&self, id: impl Display, request: &WriteRequest) -> Result<CollectionRequest, ApiFailure> {
        self.0.post(&format!("/collections/{id}/requests"), request).await
    }

    pub async fn get_request(&self, id: impl Display, request: impl Display) -> Result<CollectionRequest, ApiFailure> {
        self.0.get(&format!("/collections/{id}/requests/{request}")).await
    }

    pub async fn put_request(
        &self,
        id: impl Display,
        request: impl Display,
        body: &WriteRequest,
    ) -> Result<CollectionRequest, ApiFailure> {
        self.0.put(&format!("/collections/{id}/requests/{request}"), body).await
    }

    pub async fn delete_request(&self, id: impl Display, request: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/collections/{id}/requests/{request}")).await
    }

    pub async fn import_openapi(&self, import: &ImportOpenApi) -> Result<ImportedCollection, ApiFailure> {
        self.0.post("/collections/import/openapi", import).await
    }

    pub async fn put_sync(&self, id: impl Display, sync: &PutOpenApiSync) -> Result<OpenApiSync, ApiFailure> {
        self.0.put(&format!("/collections/{id}/openapi-sync"), sync).await
    }

    pub async fn get_sync(&self, id: impl Display) -> Result<OpenApiSync, ApiFailure> {
        self.0.get(&format!("/collections/{id}/openapi-sync")).await
    }

    pub async fn delete_sync(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/collections/{id}/openapi-sync")).await
    }

    pub async fn preview_sync(&self, id: impl Display) -> Result<SyncDiff, ApiFailure> {
        self.0.post(&format!("/collections/{id}/openapi-sync/preview"), &serde_json::json!({})).await
    }

    pub async fn apply_sync(&self, id: impl Display) -> Result<SyncApplied, ApiFailure> {
        self.0.post(&format!("/collections/{id}/openapi-sync"), &serde_json::json!({})).await
    }
}

/// The node catalog: extractors, assertion operators, special nodes, and their evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Catalog<'a>(&'a Client);

impl Catalog<'_> {
    pub async fn extractors(&self) -> Result<KindList, ApiFailure> {
        self.0.get("/extractors").await
    }

    pub async fn evaluate_extractor(&self, body: &EvaluateExtractor) -> Result<Extracted, ApiFailure> {
        self.0.post("/extractors/evaluate", body).await
    }

    pub async fn operators(&self) -> Result<OperatorList, ApiFailure> {
        self.0.get("/assertions/operators").await
    }

    pub async fn evaluate_assertions(&self, body: &EvaluateAssertions) -> Result<AssertionResults, ApiFailure> {
        self.0.post("/assertions/evaluate", body).await
    }

    pub async fn special_nodes(&self) -> Result<KindList, ApiFailure> {
        self.0.get("/special-nodes").await
    }
}

/// The runner protocol and the runner list: registration, heartbeats, long polls under a key; reports and
/// completion under a job token (a client made with `Credentials::JobToken`).
#[derive(Debug, Clone, Copy)]
pub struct Runners<'a>(&'a Client);

impl Runners<'_> {
    pub async fn register(&self, registration: &RegisterRunner) -> Result<Registered, ApiFailure> {
        self.0.post(runner_route::RUNNERS, registration).await
    }

    pub async fn list(&self, query: Query<'_>) -> Result<Page<Runner>, ApiFailure> {
        self.0.get(&with_query(runner_route::RUNNERS, query)).await
    }

    pub async fn get(&self, id: impl Display) -> Result<Runner, ApiFailure> {
        self.0.get(&format!("{}/{id}", runner_route::RUNNERS)).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("{}/{id}", runner_route::RUNNERS)).await
    }

    /// A heartbeat; `204` answers the default reply.
    pub async fn heartbeat(&self, id: RunnerId, heartbeat: &Heartbeat) -> Result<HeartbeatReply, ApiFailure> {
        let reply: Option<HeartbeatReply> = self.0.post(&runner_route::heartbeat(id), heartbeat).await?;
        Ok(reply.unwrap_or_default())
    }

    /// One long poll; `None` when it ended without a job (`204`).
    pub async fn next_jobs(&self, poll: &NextJob) -> Result<Option<JobBatch>, ApiFailure> {
        self.0.post(runner_route::NEXT_JOB, poll).await
    }

    /// Node results of a job (a batch body), under the job token.
    pub async fn report(&self, job: JobId, body: &impl serde::Serialize) -> Result<ReportReply, ApiFailure> {
        let reply: Option<ReportReply> = self.0.post(&runner_route::job_nodes(job), body).await?;
        Ok(reply.unwrap_or_default())
    }

    /// A job's completion, under the job token.
    pub async fn complete(&self, job: JobId, complete: &Complete) -> Result<(), ApiFailure> {
        let _: serde_json::Value = self.0.post(&runner_route::job_complete(job), complete).await?;
        Ok(())
    }
}

/// People: sessions (sign-in, refresh, sign-out), sign-up, the signing keys, members and invitations. Routes of the
/// person take a client with `Credentials::Bearer` (no organization); member management takes any credentials of
/// the organization.
#[derive(Debug, Clone, Copy)]
pub struct People<'a>(&'a Client);

impl People<'_> {
    /// `POST /auth/sessions`.
    pub async fn sign_in(&self, email: &Email, password: &str) -> Result<SessionTokens, ApiFailure> {
        self.0.post("/auth/sessions", &SignIn { email: email.clone(), password: password.into() }).await
    }

    /// `POST /auth/sessions/refresh` with the refresh token in the body.
    pub async fn refresh(&self, refresh_token: &str) -> Result<SessionTokens, ApiFailure> {
        self.0.post("/auth/sessions/refresh", &Refresh { refresh_token: Some(refresh_token.into()) }).await
    }

    /// `GET /auth/session`.
    pub async fn session(&self) -> Result<SessionInfo, ApiFailure> {
        self.0.get("/auth/session").await
    }

    /// `DELETE /auth/session`: signs out.
    pub async fn sign_out(&self) -> Result<(), ApiFailure> {
        self.0.delete("/auth/session").await
    }

    /// `PUT /auth/password`.
    pub async fn change_password(&self, change: &ChangePassword) -> Result<(), ApiFailure> {
        self.0.send_raw(self.0.request(Method::PUT, "/auth/password").json(change)).await.map(drop)
    }

    /// `POST /auth/signup` (when the server allows it).
    pub async fn signup(&self, signup: &Signup) -> Result<SignedUp, ApiFailure> {
        self.0.post("/auth/signup", signup).await
    }

    /// `GET /.well-known/jwks.json`.
    pub async fn jwks(&self) -> Result<Jwks, ApiFailure> {
        self.0.get("/.well-known/jwks.json").await
    }

    pub async fn members(&self, query: Query<'_>) -> Result<Page<Member>, ApiFailure> {
        self.0.get(&with_query("/organization/members", query)).await
    }

    /// `POST /organization/members`: an invitation.
    pub async fn invite(&self, member: &AddMember) -> Result<CreatedInvitation, ApiFailure> {
        self.0.post("/organization/members", member).await
    }

    pub async fn update_member(&self, user: impl Display, update: &UpdateMember) -> Result<Member, ApiFailure> {
        self.0.patch(&format!("/organization/members/{user}"), update).await
    }

    pub async fn remove_member(&self, user: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/organization/members/{user}")).await
    }

    pub async fn revoke_invitation(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/organization/invitations/{id}")).await
    }

    /// `POST /auth/invitations/accept`, as the invited person.
    pub async fn accept_invitation(&self, token: &str) -> Result<OrganizationRole, ApiFailure> {
        self.0.post("/auth/invitations/accept", &AcceptInvitation { token: token.into() }).await
    }

    /// `DELETE /organization/membership`: the person leaves the organization.
    pub async fn leave(&self) -> Result<(), ApiFailure> {
        self.0.delete("/organization/membership").await
    }
}

//! `AppState`, the composition root: what every handler can reach, as plain data. It wires the components (identity,
//! `Auth`; the capture path, `CapturePath`; the queue's writers, drafts and job tokens; the stream hub; the engine
//! and slots of tried nodes) with the pool, the settings, the wake-up signals and the shutdown token, and hands each
//! component to what takes it (`FromRef`, `Settings::claims`). Background loops are `tasks`'.

use crate::auth::component::Auth;
use crate::auth::external::{ExternalIssuers, IssuerConfig};
use crate::auth::key_cache::KeyCache;
use crate::auth::people_cache::PeopleCache;
use crate::auth::signing::SigningKeys;
use crate::auth::throttle::SignInThrottle;
use crate::capture::CapturePath;
use crate::capture::cache::EndpointCache;
use crate::capture::hub::StreamHub;
use crate::capture::writer::CaptureWriter;
use crate::db::databases::Databases;
use crate::db::group_commit::GroupCommit;
use crate::http::limits::Allowances;
use crate::queue::create::NewExecution;
use crate::queue::finish::Ending;
use crate::signals::{Invalidation, QueueSignal};
use axum::extract::FromRef;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
pub struct Inner {
    /// The primary's pool: writes, and reads of one object by id.
    pub pool: PgPool,
    /// Reads that may lag (capture lists, searches, exports, analytics, execution lists): the read replica's pool
    /// (`--read-database-url`), else `pool`.
    pub read_pool: PgPool,
    /// The pools with the hosts they follow, for `/readyz`, `/metrics` and the LISTEN connection.
    pub databases: Databases,
    pub settings: Settings,
    /// The capture path: the endpoint cache and the capture writer.
    pub capture: Arc<CapturePath>,
    /// Flow drafts as last validated, for launches.
    pub drafts: crate::queue::drafts::Drafts,
    /// Job tokens this server handed out to runners, for their completions.
    pub issued_jobs: crate::queue::issued::IssuedJobs,
    /// Runners whose rows this server read within a second, for their polls.
    pub seen_runners: crate::queue::seen::SeenRunners,
    /// Identity: the credentials' caches, signing keys, external issuers and failure budgets.
    pub auth: Arc<Auth>,
    /// Failed sign-ins per (email, address) and per address.
    pub sign_ins: SignInThrottle,
    /// What each client may still spend: requests per key, unknown capture lookups per address, streams per key.
    pub allowances: Arc<Allowances>,
    pub writers: Writers,
    /// Each organization's share of the primary's pool for heavy work (launches that resolve, reports).
    pub shares: crate::db::shares::ConnectionShares,
    pub hub: Arc<StreamHub>,
    /// Webhook nodes waiting for captures (their long polls).
    pub waiters: Arc<crate::capture::waiters::CaptureWaiters>,
    /// This process among the replicas sharing the database (in `queue_watchers` and `capture_watchers`).
    pub replica: uuid::Uuid,
    /// Wakes long-polling claims.
    pub queue: Arc<QueueSignal>,
    /// Ids of executions with new events (execution streams filter their own).
    pub execution_wakes: tokio::sync::broadcast::Sender<hookflow_shared::ExecutionId>,
    /// Wakes the trigger dispatcher: captures owe launches (NOTIFY), or notifications may have been missed.
    pub trigger_wakes: Arc<tokio::sync::Notify>,
    /// Wakes the delivery sender: deliveries were written, replayed or a destination enabled again (NOTIFY).
    pub delivery_wakes: Arc<tokio::sync::Notify>,
    /// Nodes tried through the API (`POST /flows/{flow_id}/try`).
    pub tries: Tries,
    /// Runners' delivery polls waiting on this server (`POST /runner/deliveries/next`).
    pub delivery_polls: DeliveryPolls,
    /// Cancelled when the server stops: streams end, background tasks return.
    pub shutdown: CancellationToken,
    /// The mail sender, when SMTP is configured (`Settings::smtp`).
    pub mailer: Option<crate::mail::Mailer>,
}

/// Nodes an organization may try at once on one server.
pub const TRIES_PER_ORGANIZATION: usize = 4;

/// What tries of nodes use: the runner engine that sends them (made at the first try: its clients pool their
/// connections like the embedded runner's), and each organization's tries in flight on this server.
#[derive(Debug)]
pub struct Tries {
    engine: std::sync::OnceLock<hookflow_runner::engine::Engine>,
    pub in_flight: crate::slots::KeyedSlots<hookflow_shared::OrgId>,
}

impl Default for Tries {
    fn default() -> Self {
        Self { engine: std::sync::OnceLock::new(), in_flight: crate::slots::KeyedSlots::new(TRIES_PER_ORGANIZATION) }
    }
}

impl Tries {
    pub fn engine(&self) -> &hookflow_runner::engine::Engine {
        self.engine.get_or_init(hookflow_runner::engine::Engine::new)
    }
}

/// Delivery polls one runner may hold open at once on one server (a runner polls one at a time; a reconnect may
/// briefly overlap the poll it gave up).
pub const DELIVERY_POLLS_PER_RUNNER: usize = 4;
/// Delivery polls one organization's runners may hold open at once on one server.
pub const DELIVERY_POLLS_PER_ORGANIZATION: usize = 1024;

/// Ceilings on the delivery polls held open on this server, per runner and per organization: one runner key never
/// holds unbounded waiting requests (each re-checks the database every second).
#[derive(Debug)]
pub struct DeliveryPolls {
    pub per_runner: crate::slots::KeyedSlots<hookflow_shared::RunnerId>,
    pub per_organization: crate::slots::KeyedSlots<hookflow_shared::OrgId>,
}

impl Default for DeliveryPolls {
    fn default() -> Self {
        Self {
            per_runner: crate::slots::KeyedSlots::new(DELIVERY_POLLS_PER_RUNNER),
            per_organization: crate::slots::KeyedSlots::new(DELIVERY_POLLS_PER_ORGANIZATION),
        }
    }
}

/// The group-commit writers of the queue: one task each, which writes whatever arrived while its previous statement
/// ran as the next statement (the capture writer is the capture component's).
#[derive(Debug)]
pub struct Writers {
    /// Plain launches.
    pub launches: GroupCommit<NewExecution>,
    /// Runners' completions.
    pub completions: GroupCommit<Ending>,
    /// Runners' heartbeats (when each was last heard from).
    pub heartbeats: GroupCommit<crate::queue::heartbeat::Beat>,
}

/// The server's retention defaults (`--default-execution-retention-days`, `--default-audit-retention-days`,
/// `--min-audit-retention-days`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionDefaults {
    pub execution_days: Option<u32>,
    pub audit_days: Option<u32>,
    pub min_audit_days: u32,
}

impl Default for RetentionDefaults {
    fn default() -> Self {
        Self { execution_days: None, audit_days: None, min_audit_days: 30 }
    }
}

/// Settings that handlers read; built once at startup.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL clients reach the server at, without a trailing slash (capture URLs are built from it).
    pub public_url: String,
    /// Base URL of capture URLs (`--capture-url`; the public URL unless the operator gives captures an origin of
    /// their own).
    pub capture_url: String,
    /// Whether server-side requests (replay) may go to loopback, private and link-local addresses.
    pub allow_private_targets: bool,
    /// How often retention runs.
    pub retention_interval: Duration,
    /// How long executions and audit entries are kept where an organization sets nothing, and the audit floor.
    pub retention: RetentionDefaults,
    /// The quotas of organizations whose operator set none (`--default-stored-bytes`, ...).
    pub quotas: crate::quota::QuotaDefaults,
    /// How often the capture path's view of the organizations' usage is read again (`--quota-refresh-ms`).
    pub quota_refresh: Duration,
    /// Interval of `: keep-alive` comments on idle streams.
    pub stream_keep_alive: Duration,
    /// Events buffered per stream subscriber before it is told it lagged.
    pub stream_buffer: usize,
    /// Encrypts secrets at rest (a keyring: the current key seals, previous keys still open).
    pub master_key: crate::crypto::MasterKey,
    /// The file the keyring came from (the embedded default), read again when a rotation is announced.
    pub master_key_file: Option<std::path::PathBuf>,
    /// How long a claim (or the last heartbeat or result) holds a job.
    pub lease: Duration,
    /// How often runners are asked to send heartbeats; offline after three missed.
    pub heartbeat_interval: Duration,
    /// How often expired leases are looked for.
    pub rescue_interval: Duration,
    /// How often due schedules are looked for.
    pub schedule_interval: Duration,
    /// How late an occurrence may still fire when its schedule's catch-up window is shorter (10 s).
    pub schedule_grace: Duration,
    /// How often a waiting long poll looks at the queue without a wake-up: a safety net under NOTIFY (a dropped
    /// LISTEN connection wakes every poll by itself). Each waiting runner costs a statement per interval.
    pub queue_recheck: Duration,
    /// Hash of the embedded runner's per-process key, which claims for every organization.
    pub embedded_runner_key_hash: Option<Vec<u8>>,
    /// Peers whose `Forwarded` / `X-Forwarded-For` headers name the client (`--trusted-proxies`).
    pub trusted_proxies: crate::http::client_address::TrustedProxies,
    /// How the embedded runner's slots are shared between organizations, and how long it runs a flow.
    pub embedded_runner: EmbeddedRunnerLimits,
    /// Organizations one person may make (`POST /organizations`).
    pub max_organizations_per_person: u32,
    /// Failed credential lookups one client address may cause per minute before it is answered 429.
    pub credential_failures_per_minute: u32,
    /// Connection caps and timeouts of the listener.
    pub limits: crate::http::listener::Limits,
    /// Requests per second one API key may make (bursts of twice that).
    pub key_rate_per_s: u32,
    /// The highest capture rate limit an organization may set for its endpoints.
    pub max_capture_rate_per_s: i32,
    /// Live streams (capture and execution) one API key may hold open at once.
    pub streams_per_key: usize,
    /// How long an access token of the built-in provider is valid.
    pub access_token_ttl: Duration,
    /// How long a browser session lasts at most (refreshing never extends it).
    pub session_ttl: Duration,
    /// Whether anyone may sign up (`POST /auth/signup`), creating a user and an organization.
    pub signup: bool,
    /// Where mails go (`--smtp-url`, `--smtp-from`); without it nothing is mailed, and password resets and
    /// sign-up confirmations are off.
    pub smtp: Option<crate::mail::SmtpSettings>,
    /// External OpenID providers whose access tokens are accepted.
    pub issuers: Vec<IssuerConfig>,
    /// How captures start flows: whether this server dispatches, the chain depth, the organizations' rate.
    pub triggers: TriggerSettings,
    /// Webhook waits open at once in this process, per organization and in all.
    pub waits: crate::capture::waiters::WaitLimits,
    /// The runner pools the operator declared (`--runner-pool`), `default` first.
    pub runner_pools: std::sync::Arc<[crate::pools::RunnerPool]>,
}

/// The trigger dispatcher's settings (`--trigger-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerSettings {
    /// Whether this server launches what captures owe (a replica that only captures may leave it to others).
    pub dispatch: bool,
    /// Longest chain of triggered runs: a capture sent by a run at this depth launches nothing.
    pub max_depth: u32,
    /// Trigger launches one organization may make per minute, counted across replicas.
    pub launches_per_minute: u32,
    /// How often the dispatcher looks for owed launches without a NOTIFY (crash recovery, lost notifications).
    pub sweep: Duration,
}

impl Default for TriggerSettings {
    fn default() -> Self {
        Self { dispatch: true, max_depth: 5, launches_per_minute: 600, sweep: Duration::from_secs(5) }
    }
}

impl Settings {
    pub fn new(public_url: impl Into<String>) -> Self {
        let public_url = public_url.into();
        Self {
            capture_url: public_url.clone(),
            public_url,
            allow_private_targets: false,
            retention_interval: Duration::from_secs(60),
            retention: RetentionDefaults::default(),
            quotas: crate::quota::QuotaDefaults::default(),
            quota_refresh: Duration::from_secs(1),
            stream_keep_alive: Duration::from_secs(15),
            stream_buffer: 128,
            master_key: crate::crypto::MasterKey::random(),
            master_key_file: None,
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            rescue_interval: Duration::from_secs(1),
            schedule_interval: Duration::from_secs(1),
            schedule_grace: Duration::from_secs(10),
            queue_recheck: Duration::from_secs(10),
            embedded_runner_key_hash: None,
            trusted_proxies: crate::http::client_address::TrustedProxies::default(),
            embedded_runner: EmbeddedRunnerLimits::new(4, 0.5, Duration::from_secs(900)),
            max_organizations_per_person: 20,
            credential_failures_per_minute: 60,
            limits: crate::http::listener::Limits::default(),
            key_rate_per_s: 2000,
            max_capture_rate_per_s: 10_000,
            streams_per_key: 64,
            access_token_ttl: Duration::from_secs(15 * 60),
            session_ttl: Duration::from_secs(30 * 24 * 3600),
            signup: false,
            smtp: None,
            issuers: Vec::new(),
            triggers: TriggerSettings::default(),
            waits: crate::capture::waiters::WaitLimits::default(),
            runner_pools: vec![crate::pools::RunnerPool::default_pool()].into(),
        }
    }
}

/// The embedded runner serves every organization from one set of slots: each organization holds at most
/// `org_slots` of them at once, and a run there lasts at most `max_run` (a longer `timeout_s` is cut to it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddedRunnerLimits {
    pub org_slots: u32,
    pub max_run: Duration,
}

impl Settings {
    /// What claims need of the settings.
    pub fn claims(&self) -> crate::queue::claim::ClaimSettings<'_> {
        crate::queue::claim::ClaimSettings {
            lease: self.lease,
            allow_private_targets: self.allow_private_targets,
            embedded_max_run: self.embedded_runner.max_run,
            master_key: &self.master_key,
            capture_url: &self.capture_url,
        }
    }
}

impl EmbeddedRunnerLimits {
    /// `share` (0 to 1) of `concurrency` slots per organization, at least one.
    pub fn new(concurrency: u32, share: f64, max_run: Duration) -> Self {
        let slots = (f64::from(concurrency.max(1)) * share.clamp(0.0, 1.0)).floor();
        // In range: between 0 and `concurrency`.
        let org_slots = (slots as u32).max(1);
        Self { org_slots, max_run: max_run.max(Duration::from_secs(1)) }
    }
}

impl AppState {
    /// Builds the state and starts the capture writer, which ends once the last request using it is done.
    /// The background loops are started separately (`tasks::start`).
    pub fn new(pool: PgPool, settings: Settings, shutdown: CancellationToken) -> Self {
        Self::with_databases(Databases::single(pool), settings, shutdown)
    }

    /// As [`AppState::new`], over the server's databases (a primary that may move, a read replica).
    pub fn with_databases(databases: Databases, settings: Settings, shutdown: CancellationToken) -> Self {
        let pool = databases.pool().clone();
        let replica = uuid::Uuid::now_v7();
        let allowances = Allowances::new(settings.key_rate_per_s, settings.streams_per_key);
        let auth = Arc::new(Auth {
            pool: pool.clone(),
            keys: KeyCache::default(),
            people: PeopleCache::default(),
            signing: SigningKeys::default(),
            external: ExternalIssuers::new(&settings.issuers),
            credential_failures: crate::auth::failures::CredentialFailures::new(
                settings.credential_failures_per_minute,
            ),
            allowances: allowances.clone(),
            public_url: settings.public_url.clone(),
            master_key: settings.master_key.clone(),
            trusted_proxies: settings.trusted_proxies.clone(),
        });
        let capture = Arc::new(CapturePath {
            pool: pool.clone(),
            endpoints: EndpointCache::default(),
            executions: Default::default(),
            writer: CaptureWriter::start(pool.clone()),
            handoff: Arc::new(crate::capture::handoff::Handoff::new(pool.clone())),
            allowances: allowances.clone(),
            trusted_proxies: settings.trusted_proxies.clone(),
            max_rate_per_s: settings.max_capture_rate_per_s,
            master_key: settings.master_key.clone(),
            capture_url: settings.capture_url.clone(),
            quotas: Arc::new(crate::quota::captures::CaptureQuotas::new(
                pool.clone(),
                settings.quotas,
                settings.retention_interval,
            )),
        });
        let mailer = settings.smtp.as_ref().and_then(|smtp| match crate::mail::Mailer::start(smtp, shutdown.clone()) {
            Ok(mailer) => Some(mailer),
            Err(e) => {
                tracing::error!(error = %e, "mail is off: the SMTP settings cannot be used");
                None
            }
        });
        Self(Arc::new(Inner {
            mailer,
            capture,
            writers: Writers {
                launches: GroupCommit::start(pool.clone(), crate::queue::create::MAX_BATCH, "launches"),
                completions: GroupCommit::start(pool.clone(), crate::queue::finish::MAX_BATCH, "completions"),
                heartbeats: GroupCommit::start(pool.clone(), crate::queue::heartbeat::MAX_BATCH, "heartbeats"),
            },
            shares: crate::db::shares::ConnectionShares::of_pool(pool.options().get_max_connections()),
            hub: StreamHub::new(pool.clone(), replica, shutdown.clone(), settings.stream_buffer),
            waiters: crate::capture::waiters::CaptureWaiters::new(pool.clone(), settings.waits),
            replica,
            drafts: Default::default(),
            issued_jobs: Default::default(),
            seen_runners: Default::default(),
            auth,
            sign_ins: SignInThrottle::default(),
            allowances,
            queue: Arc::default(),
            execution_wakes: tokio::sync::broadcast::channel(4096).0,
            trigger_wakes: Arc::default(),
            delivery_wakes: Arc::default(),
            tries: Tries::default(),
            delivery_polls: DeliveryPolls::default(),
            read_pool: databases.read_pool().clone(),
            databases,
            pool,
            settings,
            shutdown,
        }))
    }

    /// Drops what an invalidation names from this process's caches.
    pub fn invalidate(&self, invalidation: Invalidation) {
        match invalidation {
            Invalidation::Endpoint(id) => self.capture.endpoints.invalidate(id),
            Invalidation::Organization(id) => {
                self.capture.endpoints.forget_organization(id);
                self.auth.keys.forget_organization(id);
                self.auth.people.forget_organization(id);
            }
            Invalidation::Key(id) => self.auth.keys.forget_key(id),
            Invalidation::Session(id) => self.auth.people.forget_session(id),
            Invalidation::User(id) => {
                self.auth.people.forget_user(id);
                // Keys the person made follow their memberships.
                self.auth.keys.clear();
            }
            Invalidation::Joined(id) => self.auth.people.forget_memberships(id),
            Invalidation::SigningKeys => self.auth.signing.forget(),
            Invalidation::MasterKeys => self.reload_master_keys(),
        }
    }

    /// Drops every cached entry: invalidations may have been missed.
    pub fn forget_cached(&self) {
        self.capture.endpoints.clear();
        self.auth.keys.clear();
        self.auth.people.clear();
        self.auth.signing.forget();
        self.reload_master_keys();
    }

    /// Reads the key file again (a rotation added or retired keys); keys from flags stay as configured.
    fn reload_master_keys(&self) {
        let Some(path) = &self.settings.master_key_file else { return };
        match crate::db::data_dir::read_key_file(path) {
            Ok(keys) => {
                self.settings.master_key.replace(keys.current, keys.previous);
                self.auth.signing.forget();
                // Verification secrets no key opened may open now.
                self.capture.endpoints.clear();
                tracing::info!(version = self.settings.master_key.current_version(), "master keys reloaded");
            }
            Err(e) => tracing::error!(error = %e, "the master key file cannot be read; keeping the keys in memory"),
        }
    }
}

impl FromRef<AppState> for Arc<CapturePath> {
    fn from_ref(state: &AppState) -> Arc<CapturePath> {
        state.capture.clone()
    }
}

impl FromRef<AppState> for Arc<Auth> {
    fn from_ref(state: &AppState) -> Arc<Auth> {
        state.auth.clone()
    }
}

impl crate::http::client_address::WithTrustedProxies for AppState {
    fn trusted_proxies(&self) -> &crate::http::client_address::TrustedProxies {
        &self.settings.trusted_proxies
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_organization_holds_its_share_of_the_embedded_slots_and_at_least_one() {
        let run = Duration::from_secs(900);
        assert_eq!(EmbeddedRunnerLimits::new(4, 0.5, run).org_slots, 2);
        assert_eq!(EmbeddedRunnerLimits::new(5, 0.5, run).org_slots, 2);
        assert_eq!(EmbeddedRunnerLimits::new(2, 0.5, run).org_slots, 1);
        assert_eq!(EmbeddedRunnerLimits::new(1, 0.5, run).org_slots, 1);
        assert_eq!(EmbeddedRunnerLimits::new(8, 1.0, run).org_slots, 8);
        assert_eq!(EmbeddedRunnerLimits::new(8, 0.01, run).org_slots, 1);
    }
}

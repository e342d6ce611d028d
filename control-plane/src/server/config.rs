//! Command-line flags and `HOOKFLOW_*` environment variables of `hookflow-server`, parsed at the edge. Boolean
//! variables take 1/0, true/false, yes/no or on/off.

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hookflow_shared::OrgId;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "hookflow-server",
    version,
    about = "hookflow control plane: webhook capture, flow automation and the runner protocol over one REST + SSE API.",
    long_about = "hookflow control plane: webhook capture, flow automation and the runner protocol over one REST + SSE API.\n\n\
        With no database URL it runs a private PostgreSQL cluster from this machine's PostgreSQL server binaries in \
        --data-dir, on a Unix socket, and stops it on shutdown. On first start against an empty database it creates \
        an organization and an admin API key and prints them once.\n\n\
        Every flag can also be set through the environment variable named beside it.",
    after_help = "Examples:\n  hookflow-server                                  # embedded PostgreSQL in ./.hookflow, listen on 127.0.0.1:8080\n  \
        hookflow-server --listen 0.0.0.0:8080 --public-url https://hooks.example.com\n  \
        hookflow-server orgs create --name \"Payments team\"\n  \
        hookflow-server keys create --org <org id> --preset ci --expires-in 30d"
)]
pub struct Cli {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub logging: LogArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Args)]
pub struct StorageArgs {
    /// Directory for the embedded PostgreSQL cluster, the generated master key and the lock that keeps a second
    /// server off the same directory.
    #[arg(long, env = "HOOKFLOW_DATA_DIR", default_value = ".hookflow", global = true)]
    pub data_dir: PathBuf,
    /// PostgreSQL URL (postgres://user:pass@host:5432/db). When set, no embedded cluster is started. DATABASE_URL
    /// is read too when HOOKFLOW_DATABASE_URL is unset. libpq's forms with several hosts are followed:
    /// postgres://h1:5432,h2:5432/db?target_session_attrs=read-write, or host=h1,h2 port=5432,5432 dbname=db; new
    /// connections go to the first writable host, and to the next one when the primary fails over (with several
    /// hosts, read-write is the default).
    #[arg(long, env = "HOOKFLOW_DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,
    /// Where lists, searches, exports and analytics read (a streaming replica; they may lag by its lag), in the same
    /// forms as --database-url, e.g. postgres://r1:5432,r2:5432/db?target_session_attrs=prefer-standby (the
    /// default with several hosts). Reads of one object by id and everything else stay on the primary.
    #[arg(long, env = "HOOKFLOW_READ_DATABASE_URL", hide_env_values = true, global = true)]
    pub read_database_url: Option<String>,
    /// Directory holding initdb, pg_ctl and postgres for the embedded cluster (found on PATH, via pg_config or
    /// under /usr/lib/postgresql/*/bin when unset).
    #[arg(long, env = "HOOKFLOW_PG_BINDIR", global = true)]
    pub pg_bindir: Option<PathBuf>,
    /// Started as root, the embedded PostgreSQL runs as the `postgres` system user; when that user cannot enter
    /// --data-dir (a clone under a private home), the cluster's files go to a unique directory made here, and
    /// <data-dir>/postgres.location remembers it.
    #[arg(long, env = "HOOKFLOW_EMBEDDED_CLUSTER_DIR", default_value = "/var/lib/hookflow", global = true)]
    pub embedded_cluster_dir: PathBuf,
    /// The TCP_USER_TIMEOUT of database connections over TCP (which also get keepalive: idle 5 s, interval 2 s, 3
    /// probes), and how long a database host may leave the server's watch (a question every second, on a
    /// connection of its own) unanswered before every connection to it is cut: a primary that froze without
    /// closing its connections (SIGSTOP, a hung disk) is left within this, and requests answer 503 meanwhile. At
    /// least 1000.
    #[arg(long, env = "HOOKFLOW_DB_TCP_USER_TIMEOUT_MS", default_value_t = 10_000, global = true)]
    pub db_tcp_user_timeout_ms: u64,
}

impl StorageArgs {
    /// What `db::storage` needs to open the database.
    pub fn options(&self) -> crate::db::storage::StorageOptions {
        crate::db::storage::StorageOptions {
            data_dir: self.data_dir.clone(),
            database_url: self.database_url(),
            read_database_url: self.read_database_url.clone().filter(|u| !u.is_empty()),
            pg_bindir: self.pg_bindir.clone(),
            embedded_cluster_dir: self.embedded_cluster_dir.clone(),
            silence_limit: std::time::Duration::from_millis(self.db_tcp_user_timeout_ms.max(1000)),
        }
    }

    /// The configured database URL, falling back to `DATABASE_URL`.
    pub fn database_url(&self) -> Option<String> {
        self.database_url.clone().or_else(|| std::env::var("DATABASE_URL").ok()).filter(|u| !u.is_empty())
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address the API and capture URLs listen on.
    #[arg(long, env = "HOOKFLOW_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics listener (`GET /metrics`), apart from the API so it can stay private;
    /// `off` serves none.
    #[arg(long, env = "HOOKFLOW_METRICS_LISTEN", default_value = "127.0.0.1:9464", value_parser = metrics_address)]
    pub metrics_listen: MetricsListen,
    /// Base URL senders and clients reach this server at, used in capture URLs (default: http://<listen>).
    #[arg(long, env = "HOOKFLOW_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Base URL of capture URLs when senders should reach them on an origin of their own (e.g.
    /// https://hooks.example.com): tenants' custom answers are then never served on the app's origin
    /// (default: the public URL).
    #[arg(long, env = "HOOKFLOW_CAPTURE_URL")]
    pub capture_url: Option<String>,
    /// Base64 of 32 bytes that encrypts secrets at rest (default: generated once into <data-dir>/master.key, mode
    /// 0600; back it up). Written `v2:<base64>`, the key is used through a subkey per use, as generated keys are
    /// (`openssl rand -base64 32` with `v2:` before it makes a new one).
    #[arg(long, env = "HOOKFLOW_MASTER_KEY", hide_env_values = true, global = true)]
    pub master_key: Option<String>,
    /// Base64 keys that sealed values before the current --master-key, comma-separated: they still open those
    /// values until `hookflow-server keys rotate-master` re-encrypts them (see the runbook in README).
    #[arg(long, env = "HOOKFLOW_PREVIOUS_MASTER_KEYS", hide_env_values = true, value_delimiter = ',', global = true)]
    pub previous_master_keys: Vec<String>,
    /// Let the server's own requests for every organization (embedded runner flows, webhook replay, OpenAPI import
    /// by URL) reach loopback and private addresses, as if every organization were on the private-network
    /// allow-list (`hookflow-server orgs private-network`). For single-team installations; link-local and cloud
    /// metadata addresses stay refused.
    #[arg(long, env = "HOOKFLOW_ALLOW_PRIVATE_TARGETS", value_parser = BoolishValueParser::new())]
    pub allow_private_targets: bool,
    /// Seconds between retention sweeps (captures past their endpoint's max_age_days or max_requests).
    #[arg(long, env = "HOOKFLOW_RETENTION_INTERVAL_S", default_value_t = 60)]
    pub retention_interval_s: u64,
    /// Days a finished execution (with its node results, events and captures) is kept, for organizations whose
    /// operator set none (`hookflow-server orgs limits`); unset: kept for ever.
    #[arg(long, env = "HOOKFLOW_DEFAULT_EXECUTION_RETENTION_DAYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub default_execution_retention_days: Option<u32>,
    /// Days an audit entry is kept, for organizations whose operator set none; unset: kept for ever.
    #[arg(long, env = "HOOKFLOW_DEFAULT_AUDIT_RETENTION_DAYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub default_audit_retention_days: Option<u32>,
    /// Days an audit entry is kept at least, whatever an organization's or the default retention says.
    #[arg(long, env = "HOOKFLOW_MIN_AUDIT_RETENTION_DAYS", default_value_t = 30)]
    pub min_audit_retention_days: u32,
    /// Bytes of capture bodies and node results an organization may store, for organizations whose operator set
    /// none (`hookflow-server orgs limits`); unset: no limit.
    #[arg(long, env = "HOOKFLOW_DEFAULT_STORED_BYTES")]
    pub default_stored_bytes: Option<u64>,
    /// Endpoints an organization may have, where its operator set none; unset: no limit.
    #[arg(long, env = "HOOKFLOW_DEFAULT_ENDPOINTS")]
    pub default_endpoints: Option<u64>,
    /// Flows an organization may have, where its operator set none; unset: no limit.
    #[arg(long, env = "HOOKFLOW_DEFAULT_FLOWS")]
    pub default_flows: Option<u64>,
    /// Captures an organization may receive per UTC day, where its operator set none; unset: no limit.
    #[arg(long, env = "HOOKFLOW_DEFAULT_CAPTURES_PER_DAY")]
    pub default_captures_per_day: Option<u64>,
    /// Milliseconds between reads of the organizations' usage by the capture path (how long another replica's
    /// captures or an operator's new limit take to be seen).
    #[arg(long, env = "HOOKFLOW_QUOTA_REFRESH_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    pub quota_refresh_ms: u64,
    /// Most connections the server opens to PostgreSQL.
    #[arg(long, env = "HOOKFLOW_DB_MAX_CONNECTIONS", default_value_t = 20)]
    pub db_max_connections: u32,
    /// Run a runner inside the server, over the same HTTP protocol, serving every organization. `auto` runs it
    /// with the embedded database and not with an external one (where runners are usually deployed apart).
    #[arg(long, env = "HOOKFLOW_EMBEDDED_RUNNER", value_enum, default_value_t = EmbeddedRunner::Auto)]
    pub embedded_runner: EmbeddedRunner,
    /// Jobs the embedded runner runs at the same time.
    #[arg(long, env = "HOOKFLOW_EMBEDDED_RUNNER_CONCURRENCY", default_value_t = 4)]
    pub embedded_runner_concurrency: u32,
    /// Share of the embedded runner's slots one organization may hold at once (0 to 1; at least one slot), so
    /// one tenant's slow runs never keep the others' queued.
    #[arg(long, env = "HOOKFLOW_EMBEDDED_RUNNER_ORG_SHARE", default_value_t = 0.5, value_parser = share)]
    pub embedded_runner_org_share: f64,
    /// Seconds the embedded runner lets a flow run at most; a longer `timeout_s` is cut to this, and a run that
    /// times out says so.
    #[arg(long, env = "HOOKFLOW_EMBEDDED_RUNNER_MAX_RUN_S", default_value_t = 900,
        value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub embedded_runner_max_run_s: u64,
    /// A pool of runners an autoscaler scales on its own backlog, as NAME=LABEL[,LABEL...] (repeat the flag, or
    /// separate pools with `;` in the environment variable; at most 50). NAME matches ^[a-z0-9][a-z0-9_-]{0,31}$.
    /// A queued execution counts in a pool's backlog when every label it requires is one of the pool's; a runner
    /// belongs to it when it carries all of them. The pool `default`, with no labels, always exists.
    /// `GET /runner/pools/{pool}` and the `hookflow_pool_*` metrics report each pool.
    #[arg(
        long = "runner-pool",
        env = "HOOKFLOW_RUNNER_POOLS",
        value_delimiter = ';',
        value_name = "NAME=LABEL[,LABEL...]"
    )]
    pub runner_pools: Vec<String>,
    /// Seconds a claim holds a job without a heartbeat or result before it goes back to the queue.
    #[arg(long, env = "HOOKFLOW_LEASE_S", default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub lease_s: u64,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub people: PeopleArgs,
    #[command(flatten)]
    pub mail: MailArgs,
    #[command(flatten)]
    pub triggers: TriggerArgs,
}

/// How captures start flows (endpoints' `triggers`).
#[derive(Debug, Clone, Args)]
pub struct TriggerArgs {
    /// Launch the flows captures owe their endpoints' triggers. Off for replicas that should only capture: what
    /// their captures owe is launched by the replicas that dispatch.
    #[arg(long, env = "HOOKFLOW_TRIGGER_DISPATCH", default_value_t = true, value_parser = BoolishValueParser::new(),
        action = clap::ArgAction::Set)]
    pub trigger_dispatch: bool,
    /// Longest chain of triggered runs (a run whose requests reach a triggering endpoint launches the next): a
    /// capture sent by a run at this depth launches nothing, and the audit log says so.
    #[arg(long, env = "HOOKFLOW_MAX_TRIGGER_DEPTH", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_trigger_depth: u32,
    /// Trigger launches one organization may make per minute, across replicas; past it a matching capture is
    /// still stored and answered, launches nothing, and the audit log says so (once a minute per endpoint).
    #[arg(long, env = "HOOKFLOW_TRIGGER_LAUNCHES_PER_MINUTE", default_value_t = 600,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub trigger_launches_per_minute: u32,
}

impl TriggerArgs {
    pub fn settings(&self) -> crate::state::TriggerSettings {
        crate::state::TriggerSettings {
            dispatch: self.trigger_dispatch,
            max_depth: self.max_trigger_depth,
            launches_per_minute: self.trigger_launches_per_minute,
            ..crate::state::TriggerSettings::default()
        }
    }
}

/// How people sign in: the built-in identity provider's tokens, sign-up, external OpenID providers.
#[derive(Debug, Clone, Args)]
pub struct PeopleArgs {
    /// Let anyone sign up (POST /auth/signup), creating a user and an organization they own. Off by default:
    /// operators create users (`hookflow-server users create`) and members invite people.
    #[arg(long, env = "HOOKFLOW_SIGNUP", value_parser = BoolishValueParser::new())]
    pub signup: bool,
    /// Seconds an access token of the built-in provider is valid (sessions refresh it).
    #[arg(long, env = "HOOKFLOW_ACCESS_TOKEN_TTL_S", default_value_t = 900, value_parser = clap::value_parser!(u64).range(30..=86_400))]
    pub access_token_ttl_s: u64,
    /// Days a browser session lasts at most; refreshing never extends it.
    #[arg(long, env = "HOOKFLOW_SESSION_TTL_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=365))]
    pub session_ttl_days: u64,
    /// An external OpenID provider whose JWT access tokens are accepted, as
    /// "<issuer URL> audience=<aud> algorithms=RS256,ES256" (repeat the flag, or separate with `;` in the
    /// environment variable). Keys come from the issuer's discovery document. Options: client_id=<the app's
    /// public client>, resource=<indicator>, clients=a,b (the clients whose tokens are accepted),
    /// domains=example.com,example.org (email domains its people may have), max_lifetime_s=86400.
    #[arg(long = "oidc-issuer", env = "HOOKFLOW_OIDC_ISSUERS", value_delimiter = ';')]
    pub oidc_issuers: Vec<crate::auth::external::IssuerConfig>,
    /// Organizations one person may make with `POST /organizations` (those they were invited to do not count);
    /// past it, 403 `quota_exceeded`.
    #[arg(long, env = "HOOKFLOW_MAX_ORGANIZATIONS_PER_PERSON", default_value_t = 20)]
    pub max_organizations_per_person: u32,
    /// Email of the owner user the first start creates (with a one-time password it prints).
    #[arg(long, env = "HOOKFLOW_OWNER_EMAIL", default_value = "owner@hookflow.local")]
    pub owner_email: String,
}

/// Where mails go. Without `--smtp-url` nothing is mailed: password resets and sign-up confirmations are off
/// (their routes answer 404), sign-up (with `--signup`) makes the account at once, and invitations are only
/// shown to the inviter.
#[derive(Debug, Clone, Args)]
pub struct MailArgs {
    /// The SMTP server mails go through: smtp://[user[:password]@]host[:port] (port 587 by default; STARTTLS when
    /// the server offers it, or append ?tls=required to insist on it) or smtps://[user[:password]@]host[:port]
    /// (TLS from the first byte; port 465 by default).
    #[arg(long, env = "HOOKFLOW_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// The sender of every mail, e.g. "hookflow <hookflow@example.com>" (required with --smtp-url).
    #[arg(long, env = "HOOKFLOW_SMTP_FROM")]
    pub smtp_from: Option<String>,
    /// A file holding the SMTP password (one line), instead of a password in --smtp-url.
    #[arg(long, env = "HOOKFLOW_SMTP_PASSWORD_FILE")]
    pub smtp_password_file: Option<PathBuf>,
    /// A PEM certificate to trust for the SMTP server's TLS besides the platform's roots (a relay whose
    /// certificate comes from a private CA).
    #[arg(long, env = "HOOKFLOW_SMTP_CA_FILE")]
    pub smtp_ca_file: Option<PathBuf>,
}

impl MailArgs {
    /// The SMTP settings, `None` without `--smtp-url`; an error names the flag.
    pub fn settings(&self) -> Result<Option<crate::mail::SmtpSettings>, String> {
        let Some(url) = self.smtp_url.as_deref().filter(|u| !u.is_empty()) else {
            if self.smtp_password_file.is_some() {
                return Err("--smtp-password-file needs --smtp-url".into());
            }
            if self.smtp_ca_file.is_some() {
                return Err("--smtp-ca-file needs --smtp-url".into());
            }
            return Ok(None);
        };
        let settings =
            crate::mail::SmtpSettings::parse(url, self.smtp_from.as_deref(), self.smtp_password_file.as_deref())?;
        match &self.smtp_ca_file {
            Some(file) => settings.with_ca_file(file).map(Some),
            None => Ok(Some(settings)),
        }
    }
}

/// What one client may hold or spend: connections, time, requests, streams.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Connections held at most. At the cap, a newcomer from an address under its share takes the place of the
    /// longest-idle connection of the busiest address.
    #[arg(long, env = "HOOKFLOW_MAX_CONNECTIONS", default_value_t = 8192)]
    pub max_connections: usize,
    /// Connections one client address may hold before they carry valid credentials (a reverse proxy in front
    /// counts as one address; connections that authenticated, such as runners' long polls, are not counted).
    #[arg(long, env = "HOOKFLOW_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 1024)]
    pub max_connections_per_address: usize,
    /// Connections held at once whose requests passed authentication, the rate limit and the organization check
    /// (default: what the open-file limit leaves after the database pools, the listeners, --max-connections and
    /// 1,024 spare). When full, a newly proven connection closes the idlest connection of the key, person or
    /// runner key holding the most.
    #[arg(long, env = "HOOKFLOW_MAX_PROVEN_CONNECTIONS")]
    pub max_proven_connections: Option<usize>,
    /// Seconds a request's headers may take to arrive (and an idle HTTP/1 connection may wait for the next).
    #[arg(long, env = "HOOKFLOW_HEADER_TIMEOUT_S", default_value_t = 30)]
    pub header_timeout_s: u64,
    /// Seconds a connection with no request in flight stays open.
    #[arg(long, env = "HOOKFLOW_IDLE_TIMEOUT_S", default_value_t = 75)]
    pub idle_timeout_s: u64,
    /// Seconds a request's body may take to arrive.
    #[arg(long, env = "HOOKFLOW_BODY_TIMEOUT_S", default_value_t = 60)]
    pub body_timeout_s: u64,
    /// Requests per second one API key may make (bursts of twice that); 429 with Retry-After beyond.
    #[arg(long, env = "HOOKFLOW_KEY_RATE_LIMIT", default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub key_rate_limit: u32,
    /// The highest `capture_rate_limit_per_s` an organization may set for its endpoints.
    #[arg(long, env = "HOOKFLOW_MAX_CAPTURE_RATE", default_value_t = 10_000, value_parser = clap::value_parser!(i32).range(1..))]
    pub max_capture_rate: i32,
    /// Addresses and CIDR blocks of reverse proxies in front of the server, comma-separated (e.g.
    /// `10.0.0.0/8,127.0.0.1`): their `Forwarded` / `X-Forwarded-For` headers name the client, whose address then
    /// counts for sign-in throttles and rate budgets and is recorded as a capture's `source_ip`. Forwarding
    /// headers from any other peer are ignored.
    #[arg(long, env = "HOOKFLOW_TRUSTED_PROXIES", default_value = "", value_parser = crate::http::client_address::TrustedProxies::parse)]
    pub trusted_proxies: crate::http::client_address::TrustedProxies,
    /// The header those proxies write the client's address into (the other is never read: a proxy passes a header
    /// it does not write through, so a client could name its own address there).
    #[arg(long, env = "HOOKFLOW_FORWARDED_HEADER", value_enum, default_value = "x-forwarded-for")]
    pub forwarded_header: crate::http::client_address::ForwardedHeader,
    /// Live streams (capture and execution) one API key may hold open at once.
    #[arg(long, env = "HOOKFLOW_STREAMS_PER_KEY", default_value_t = 64)]
    pub streams_per_key: usize,
    /// Failed lookups of API keys, job tokens and refresh tokens one client address may cause per minute; past
    /// it the address is answered 429 with Retry-After before any lookup (credentials that worked here still do).
    #[arg(long, env = "HOOKFLOW_CREDENTIAL_FAILURES_PER_MINUTE", default_value_t = 60,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub credential_failures_per_minute: u32,
    /// Seconds a database statement may run before it is cancelled.
    #[arg(long, env = "HOOKFLOW_STATEMENT_TIMEOUT_S", default_value_t = 30)]
    pub statement_timeout_s: u64,
    /// Webhook nodes' waits one organization may have open at once on this server; past it the wait route answers
    /// 429 with Retry-After.
    #[arg(long, env = "HOOKFLOW_MAX_WAITS_PER_ORGANIZATION", default_value_t = 1_000,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub max_waits_per_organization: u64,
    /// Webhook nodes' waits this server holds open at once, all organizations together; past it the wait route
    /// answers 429 with Retry-After.
    #[arg(long, env = "HOOKFLOW_MAX_WAITS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_waits: u64,
}

impl LimitArgs {
    /// The webhook waits' limits.
    pub fn waits(&self) -> crate::capture::waiters::WaitLimits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        crate::capture::waiters::WaitLimits {
            per_organization: count(self.max_waits_per_organization),
            total: count(self.max_waits),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbeddedRunner {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log format on standard error.
    #[arg(long, env = "HOOKFLOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Log filter, e.g. `info` or `hookflow_control_plane=debug,sqlx=warn`.
    #[arg(long, env = "HOOKFLOW_LOG", default_value = "info", global = true)]
    pub log: String,
}

/// Where `/metrics` is served, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsListen {
    Off,
    At(SocketAddr),
}

fn metrics_address(text: &str) -> Result<MetricsListen, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(MetricsListen::Off);
    }
    text.parse()
        .map(MetricsListen::At)
        .map_err(|e| format!("`{text}`: {e} (an address such as 127.0.0.1:9464, or off)"))
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err(format!("`{text}`: a share between 0 and 1, such as 0.5")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (what happens with no subcommand).
    Serve,
    /// Manage organizations (operator commands: they talk to the database directly, no API key needed).
    #[command(subcommand)]
    Orgs(OrgsCommand),
    /// Create API keys for an organization (operator command; prints the key once).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage people (operator commands): create users, reset passwords.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Copy the embedded cluster, online, into a new directory: a consistent copy (pg_basebackup with its WAL,
    /// checked by pg_verifybackup), the cluster's password, and a note of where the master key lives.
    #[command(
        long_about = "Copy the embedded cluster, online, into a new directory: a consistent copy (pg_basebackup \
            with the WAL written meanwhile, checked by pg_verifybackup), the cluster's password, and a note of where \
            the master key lives (hookflow-backup.json). A running server keeps serving; with none running, the \
            cluster is started for the copy and stopped after. The master key is copied only with \
            --include-master-key: without it, keep the key apart (the backup alone cannot open secrets).\n\n\
            With an external PostgreSQL (--database-url) back the database up with its own tools: docs/RUNBOOK.md \
            has a tested pgBackRest recipe.",
        after_help = "Examples:\n  hookflow-server --data-dir /var/lib/hookflow/data backup --to /backups/hookflow-2026-11-29\n  \
            hookflow-server --data-dir /var/lib/hookflow/data restore --from /backups/hookflow-2026-11-29   # into a new --data-dir"
    )]
    Backup {
        /// Directory the backup goes into; it must be absent or empty.
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Copy the master key into the backup too (DIR/master.key, mode 0600): the backup then opens every secret.
        #[arg(long)]
        include_master_key: bool,
    },
    /// Lay a backup down as a fresh --data-dir (which must be absent or empty), start its cluster once to check it,
    /// and put the master key back at <data-dir>/master.key when the backup holds it.
    Restore {
        /// Directory a `backup --to` made.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
    },
    /// Print the OpenAPI 3.1 document this server serves at /openapi.json (to generate clients offline).
    Openapi {
        /// The capture-rate ceiling the document states (the server's --max-capture-rate).
        #[arg(long, default_value_t = 10_000)]
        max_capture_rate: i32,
    },
}

#[derive(Debug, Subcommand)]
pub enum OrgsCommand {
    /// Create an organization and print its id.
    Create {
        /// Display name of the organization.
        #[arg(long)]
        name: String,
    },
    /// List organizations with their ids.
    List,
    /// Set how long an organization keeps its finished executions and its audit entries, and its quotas (`none`:
    /// the server's default, `--default-execution-retention-days`, `--default-stored-bytes`, ...).
    Limits {
        /// Organization id.
        #[arg(long)]
        org: OrgId,
        /// Days a finished execution is kept, with its node results, events and captures (or `none`).
        #[arg(long, value_name = "DAYS|none", value_parser = days_or_none)]
        execution_retention_days: Option<RetentionDays>,
        /// Days an audit entry is kept (or `none`); never less than the server's --min-audit-retention-days.
        #[arg(long, value_name = "DAYS|none", value_parser = days_or_none)]
        audit_retention_days: Option<RetentionDays>,
        /// Bytes of capture bodies and node results the organization may store (or `none`).
        #[arg(long, value_name = "BYTES|none", value_parser = count_or_none)]
        stored_bytes: Option<QuotaLimit>,
        /// Endpoints the organization may have (or `none`).
        #[arg(long, value_name = "N|none", value_parser = count_or_none)]
        endpoints: Option<QuotaLimit>,
        /// Flows the organization may have (or `none`).
        #[arg(long, value_name = "N|none", value_parser = count_or_none)]
        flows: Option<QuotaLimit>,
        /// Captures the organization may receive per UTC day (or `none`).
        #[arg(long, value_name = "N|none", value_parser = count_or_none)]
        captures_per_day: Option<QuotaLimit>,
    },
    /// Put an organization on the private-network allow-list (`--allow`) or take it off (`--deny`): its flows run
    /// by the embedded runner, its replays and imports may then reach loopback and private addresses.
    PrivateNetwork {
        /// Organization id.
        #[arg(long)]
        org: OrgId,
        /// Allow private addresses.
        #[arg(long, conflicts_with = "deny", required_unless_present = "deny")]
        allow: bool,
        /// Refuse private addresses again (the default for new organizations).
        #[arg(long)]
        deny: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a user with a one-time password (printed once; the first sign-in must change it) and make them a
    /// member of an organization.
    Create {
        #[arg(long)]
        email: String,
        /// Organization id.
        #[arg(long)]
        org: OrgId,
        /// owner, admin, member or viewer.
        #[arg(long, default_value = "member", value_parser = parse_role)]
        role: hookflow_shared::Role,
    },
    /// Give a user a new one-time password (printed once) and end their sessions.
    ResetPassword {
        #[arg(long)]
        email: String,
    },
}

fn parse_role(text: &str) -> Result<hookflow_shared::Role, String> {
    hookflow_shared::Role::parse(text).ok_or_else(|| format!("`{text}`: use owner, admin, member or viewer"))
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key and print it once.
    Create {
        /// Organization id the key belongs to.
        #[arg(long)]
        org: OrgId,
        /// Name shown in key listings.
        #[arg(long, default_value = "operator key")]
        name: String,
        /// Comma-separated scopes, e.g. flows:execute,flows:read (see GET /permissions).
        #[arg(long, value_delimiter = ',', required_unless_present = "preset", conflicts_with = "preset")]
        scopes: Vec<String>,
        /// A preset instead of --scopes: ci, runner or read-only.
        #[arg(long)]
        preset: Option<String>,
        /// Lifetime such as 30d, 12h or 90m; `never` for no expiry (not recommended).
        #[arg(long, default_value = "30d", value_parser = parse_lifetime)]
        expires_in: Lifetime,
    },
    /// Make a new signing key for the built-in identity provider's access tokens. The previous key keeps
    /// verifying the tokens it signed (both are published in /.well-known/jwks.json); running servers switch at
    /// once.
    RotateSigning,
    /// Re-encrypt every secret and signing key under the current master key, online (running servers keep
    /// working; several may run). With the embedded default, --new-key first puts a new random key at the head of
    /// <data-dir>/master.key (the old one stays after it) and running servers switch to it; once no value is
    /// left under an old key, --retire-previous drops the old keys from that file. With --master-key, configure
    /// --previous-master-keys on every server first (README: Runbook).
    RotateMaster {
        /// Start with a new random key in <data-dir>/master.key (embedded default only).
        #[arg(long)]
        new_key: bool,
        /// After re-encrypting, drop the previous keys from <data-dir>/master.key when no value uses them.
        #[arg(long)]
        retire_previous: bool,
    },
}

/// A key lifetime: a duration, or `None` for a key that never expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime(pub Option<Duration>);

/// Parses `30d`, `12h`, `90m`, `45s` or `never`.
pub fn parse_lifetime(text: &str) -> Result<Lifetime, String> {
    if text == "never" {
        return Ok(Lifetime(None));
    }
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = number.parse().map_err(|_| format!("`{text}` is not a lifetime like 30d, 12h, 90m or never"))?;
    let seconds = match unit {
        "d" => n * 86_400,
        "h" => n * 3_600,
        "m" => n * 60,
        "s" => n,
        _ => {
            return Err(format!("`{text}`: use a unit of d, h, m or s (e.g. 30d), or never"));
        }
    };
    if seconds == 0 {
        return Err("a key lifetime must be longer than zero".into());
    }
    Ok(Lifetime(Some(Duration::from_secs(seconds))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn lifetimes() {
        assert_eq!(parse_lifetime("30d"), Ok(Lifetime(Some(Duration::from_secs(30 * 86_400)))));
        assert_eq!(parse_lifetime("90m"), Ok(Lifetime(Some(Duration::from_secs(5_400)))));
        assert_eq!(parse_lifetime("never"), Ok(Lifetime(None)));
        assert!(parse_lifetime("0d").is_err());
        assert!(parse_lifetime("30 days").is_err());
        assert!(parse_lifetime("d").is_err());
    }

    #[test]
    fn shares_are_fractions_of_one() {
        assert_eq!(share("0.5"), Ok(0.5));
        assert_eq!(share("1"), Ok(1.0));
        assert!(share("0").is_err() && share("1.5").is_err() && share("half").is_err() && share("NaN").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}

/// A retention in days, or `None` for the server's default (`none` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionDays(pub Option<u32>);

/// A number of days (1 or more), or `none`.
fn days_or_none(text: &str) -> Result<RetentionDays, String> {
    if text == "none" {
        return Ok(RetentionDays(None));
    }
    match text.parse::<u32>() {
        Ok(days) if days >= 1 && i32::try_from(days).is_ok() => Ok(RetentionDays(Some(days))),
        _ => Err(format!("`{text}` is not a number of days (1 or more) nor `none`")),
    }
}

/// A quota (0 or more), or `None` for the server's default (`none` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimit(pub Option<u64>);

/// A whole number (0 or more, at most 2^63 - 1), or `none`.
fn count_or_none(text: &str) -> Result<QuotaLimit, String> {
    if text == "none" {
        return Ok(QuotaLimit(None));
    }
    match text.parse::<u64>() {
        Ok(n) if i64::try_from(n).is_ok() => Ok(QuotaLimit(Some(n))),
        _ => Err(format!("`{text}` is not a whole number (0 or more) nor `none`")),
    }
}

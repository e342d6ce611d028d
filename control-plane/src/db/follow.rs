//! Following the host a pool must use, as libpq's `target_session_attrs` does but for the pool's whole life: the
//! first host in order that suits (a writable primary; for reads, a standby first) gets the pool's new connections;
//! a watch asks that host every second what it is and, when it is gone or no longer suits, looks through the hosts
//! again and points the pool at the one that suits (`Pool::set_connect_options`). Connections opened before the
//! switch are dropped before their next use, a new connection that lands on a host that does not suit is refused
//! (so the request answers 503 and never writes to a demoted primary), and whoever subscribed (the LISTEN
//! connection) is told. A host that stops answering the watch for the silence limit (`--db-tcp-user-timeout-ms`)
//! while its sockets stay open (a frozen primary) has every connection to it cut (`db::fence`), so nothing waits on
//! it longer. A target of one host with no session attributes is watched for silence only when it is reached over
//! TCP; one on a Unix socket is a plain pool, as before: no watch.

use crate::db::conninfo::{Endpoint, HostRole, SessionAttrs, Target};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions as _, Connection as _, PgConnection};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// How often the current host is asked what it is.
const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// How often the hosts are looked through again while none suits.
const RETRY_PERIOD: Duration = Duration::from_millis(250);
/// How often a read pool on a primary (`prefer-standby` with no standby up) looks for a standby again.
const PREFER_PERIOD: Duration = Duration::from_secs(5);
/// How long one host may take to connect and answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often "no host suits" is logged while it lasts.
const QUIET_PERIOD: Duration = Duration::from_secs(10);

/// How long a TCP host may leave the watch unanswered before every connection to it is cut, unless configured.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(10);

/// What a host reports.
const ROLE_SQL: &str = "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'";

/// What the pool is for: the writable primary, or the reads that may lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

/// What the watch heard from the current host.
enum Asked {
    /// It answered and suits.
    Suits(HostRole),
    /// It answered but no longer suits (a demoted primary).
    Unsuited,
    /// It answered with an error (too many connections, starting up, a password refused): alive, so it is not
    /// silent and nothing is cut, but it serves nothing now.
    Erred,
    /// It did not answer within `PROBE_TIMEOUT` (or its connection failed).
    Silent,
}

/// What the pool's connection hooks share with the watch.
#[derive(Debug)]
struct Gate {
    /// When the pool last moved to another host: connections older than this are dropped before use.
    switched_at: Mutex<Instant>,
    /// What a host must be for a new connection to be kept (`None`: anything).
    attrs: Option<SessionAttrs>,
    /// Wakes the watch at once (a new connection found a host that does not suit).
    nudge: Notify,
}

/// A pool and the host it follows.
#[derive(Debug)]
pub struct Follower {
    role: Role,
    target: Target,
    attrs: SessionAttrs,
    pool: PgPool,
    gate: Arc<Gate>,
    /// Index in `target.hosts` of the host new connections go to (`None` before the first look).
    current: Mutex<Option<usize>>,
    /// Moves from one host to another seen by this process.
    failovers: AtomicU64,
    /// Counts moves, for subscribers.
    changes: watch::Sender<u64>,
    /// When "no host suits" was last logged (once per `QUIET_PERIOD` while it lasts).
    complained_at: Mutex<Option<Instant>>,
    /// How long the current host may leave the watch unanswered before its connections are cut.
    silence_limit: Duration,
    /// Whether a plain target (one host, no attributes) is watched for silence (it is reached over TCP).
    watch_silence: bool,
}

/// How the pool's connections are made: what every connection gets before its host's address.
pub type Prepare = Box<dyn Fn(PgConnectOptions) -> PgConnectOptions + Send + Sync>;

impl Follower {
    /// A follower of a plain pool made elsewhere (a test's pool, the embedded cluster): no watch, no hooks.
    pub fn fixed(pool: PgPool, role: Role) -> Arc<Self> {
        let options = (*pool.connect_options()).clone();
        Arc::new(Self::assemble(role, Target::single(options), SessionAttrs::Any, pool, gate(None)))
    }

    /// A follower of `target` with `attrs`: its pool (from `pool_options`, connections from `prepare`), not yet
    /// pointed anywhere but the first host.
    pub fn new(
        role: Role,
        target: Target,
        attrs: SessionAttrs,
        pool_options: sqlx::postgres::PgPoolOptions,
        prepare: &Prepare,
    ) -> Arc<Self> {
        let target = Target {
            hosts: target.hosts.into_iter().map(|(endpoint, options)| (endpoint, prepare(options))).collect(),
            attrs: target.attrs,
        };
        let checked = (attrs != SessionAttrs::Any && attrs != SessionAttrs::PreferStandby).then_some(attrs);
        let gate = gate(checked);
        let (acquire_gate, connect_gate) = (gate.clone(), gate.clone());
        let pool = pool_options
            .before_acquire(move |_, meta| {
                let keep = meta.age <= lock(&acquire_gate.switched_at).elapsed();
                Box::pin(async move { Ok(keep) })
            })
            .after_connect(move |conn, _| {
                let gate = connect_gate.clone();
                Box::pin(async move { check_new_connection(conn, &gate).await })
            })
            .connect_lazy_with(target.hosts[0].1.clone());
        Arc::new(Self::assemble(role, target, attrs, pool, gate))
    }

    fn assemble(role: Role, target: Target, attrs: SessionAttrs, pool: PgPool, gate: Arc<Gate>) -> Self {
        Self {
            role,
            target,
            attrs,
            pool,
            gate,
            current: Mutex::new(None),
            failovers: AtomicU64::new(0),
            changes: watch::channel(0).0,
            complained_at: Mutex::new(None),
            silence_limit: SILENCE_LIMIT,
            watch_silence: false,
        }
    }

    /// Cuts the connections to a host silent for `limit` (`--db-tcp-user-timeout-ms`); a plain target over TCP is
    /// then watched for silence too.
    pub fn with_silence_limit(mut self: Arc<Self>, limit: Duration) -> Arc<Self> {
        if let Some(this) = Arc::get_mut(&mut self) {
            this.silence_limit = limit.max(WATCH_PERIOD);
            this.watch_silence = this.target.hosts.iter().all(|(endpoint, _)| !endpoint.host.starts_with('/'));
        }
        self
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The host new connections go to.
    pub fn current(&self) -> Endpoint {
        self.target.hosts[lock(&self.current).unwrap_or(0)].0.clone()
    }

    /// Moves from one host to another seen since the start.
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// Changes each time the pool moves to another host.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether this pool has a watch (several hosts, or a host that must be asked).
    pub fn follows(&self) -> bool {
        self.target.hosts.len() > 1 || self.attrs != SessionAttrs::Any
    }

    /// Whether the watch runs: to follow, or to notice a TCP host gone silent.
    fn watches(&self) -> bool {
        self.follows() || self.watch_silence
    }

    /// Points the pool at the first host that suits, looking for up to `patience` (a server starting during a
    /// failover waits for its end); the error says what each host answered.
    pub async fn find(&self, patience: Duration) -> Result<(), String> {
        if !self.follows() {
            return Ok(());
        }
        let deadline = Instant::now() + patience;
        loop {
            match self.look().await {
                Ok(index) => {
                    self.switch(index, false);
                    return Ok(());
                }
                Err(report) if Instant::now() >= deadline => return Err(report),
                Err(_) => tokio::time::sleep(RETRY_PERIOD * 4).await,
            }
        }
    }

    /// The watch, until `shutdown`; nothing to do for a plain pool.
    pub async fn follow(self: Arc<Self>, shutdown: CancellationToken) {
        if !self.watches() {
            return;
        }
        // The watch's own connection, with the count of moves when it was made.
        let mut watching: Option<(PgConnection, u64)> = None;
        let mut looked_for_standby = Instant::now();
        // When the current host last answered, and when its connections were last cut for its silence.
        let mut answered_at = Instant::now();
        let mut cut_at: Option<Instant> = None;
        // The current host's addresses, looked up once per host.
        let mut peers: Option<(Endpoint, Vec<std::net::SocketAddr>)> = None;
        loop {
            if watching.as_ref().is_some_and(|(_, seen)| *seen != *self.changes.borrow()) {
                watching = None;
            }
            let asked = self.ask_current(&mut watching).await;
            if matches!(asked, Asked::Suits(_)) {
                self.tune_connections(&mut peers).await;
            }
            if matches!(asked, Asked::Silent) {
                if answered_at.elapsed() >= self.silence_limit
                    && cut_at.is_none_or(|at| at.elapsed() >= self.silence_limit)
                {
                    cut_at = Some(Instant::now());
                    self.cut_silent_host(answered_at.elapsed()).await;
                }
            } else {
                (answered_at, cut_at) = (Instant::now(), None);
            }
            let pause = match asked {
                Asked::Suits(role) if self.attrs == SessionAttrs::PreferStandby && !role.in_recovery => {
                    // On a primary for want of a standby: look for one now and then.
                    if looked_for_standby.elapsed() >= PREFER_PERIOD {
                        looked_for_standby = Instant::now();
                        self.look_and_switch(false).await;
                    }
                    WATCH_PERIOD
                }
                Asked::Suits(_) => WATCH_PERIOD,
                Asked::Unsuited | Asked::Erred | Asked::Silent => {
                    watching = None;
                    if self.look_and_switch(true).await { WATCH_PERIOD } else { RETRY_PERIOD }
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.gate.nudge.notified() => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Gives the connections to the current host that lack them TCP keepalive and the user timeout (`db::fence`).
    async fn tune_connections(&self, peers: &mut Option<(Endpoint, Vec<std::net::SocketAddr>)>) {
        let endpoint = self.current();
        if peers.as_ref().is_none_or(|(known, _)| *known != endpoint) {
            let addresses = crate::db::fence::addresses(&endpoint.host, endpoint.port).await;
            *peers = Some((endpoint, addresses));
        }
        let addresses = peers.as_ref().map(|(_, addresses)| addresses.clone()).unwrap_or_default();
        let limit = self.silence_limit;
        let tuned = tokio::task::spawn_blocking(move || crate::db::fence::tune(&addresses, limit)).await.unwrap_or(0);
        if tuned > 0 {
            tracing::debug!(connections = tuned, "database connections given TCP keepalive and a user timeout");
        }
    }

    /// What the current host is, on the watch's own connection.
    async fn ask_current(&self, watching: &mut Option<(PgConnection, u64)>) -> Asked {
        if watching.is_none() {
            let seen = *self.changes.borrow();
            let options = self.target.hosts[lock(&self.current).unwrap_or(0)].1.clone();
            match tokio::time::timeout(PROBE_TIMEOUT, options.connect()).await {
                Ok(Ok(conn)) => *watching = Some((conn, seen)),
                Ok(Err(sqlx::Error::Database(_))) => return Asked::Erred,
                _ => return Asked::Silent,
            }
        }
        let Some((conn, _)) = watching.as_mut() else { return Asked::Silent };
        let asked = tokio::time::timeout(PROBE_TIMEOUT, sqlx::query_as::<_, (bool, bool)>(ROLE_SQL).fetch_one(conn));
        let role = match asked.await {
            Ok(Ok((in_recovery, read_only))) => HostRole { in_recovery, read_only },
            Ok(Err(sqlx::Error::Database(_))) => return Asked::Erred,
            _ => return Asked::Silent,
        };
        if self.attrs.accepts(role) { Asked::Suits(role) } else { Asked::Unsuited }
    }

    /// The current host has not answered for `silent`: connections made before now are dropped before their next
    /// use, and every connection of the process to the host is cut (statements waiting there fail at once).
    async fn cut_silent_host(&self, silent: Duration) {
        *lock(&self.gate.switched_at) = Instant::now();
        let endpoint = self.current();
        let peers = crate::db::fence::addresses(&endpoint.host, endpoint.port).await;
        let cut = tokio::task::spawn_blocking(move || crate::db::fence::cut(&peers)).await.unwrap_or(0);
        tracing::warn!(role = ?self.role, host = %endpoint, silent_s = silent.as_secs(), connections = cut,
            "the database host stopped answering; its connections are cut (requests answer 503 until it answers \
             or another host takes over)");
    }

    /// Looks through the hosts and moves the pool to the one that suits; whether one did.
    async fn look_and_switch(&self, retire_same: bool) -> bool {
        match self.look().await {
            Ok(index) => {
                self.switch(index, retire_same);
                true
            }
            Err(report) => {
                let mut complained_at = lock(&self.complained_at);
                if complained_at.is_none_or(|at| at.elapsed() >= QUIET_PERIOD) {
                    *complained_at = Some(Instant::now());
                    tracing::warn!(role = ?self.role, hosts = %report, "no database host suits; looking again");
                }
                false
            }
        }
    }

    /// The first host in order that suits (for `prefer-standby`, the first standby, else the first that
    /// answers), or what each host answered.
    async fn look(&self) -> Result<usize, String> {
        let mut fallback = None;
        let mut report = Vec::new();
        for (index, (endpoint, options)) in self.target.hosts.iter().enumerate() {
            match probe(options).await {
                Ok(role) if self.attrs == SessionAttrs::PreferStandby && !role.in_recovery => {
                    fallback = fallback.or(Some(index));
                    report.push(format!("{endpoint}: primary"));
                }
                Ok(role) if self.attrs.accepts(role) => return Ok(index),
                Ok(role) => report.push(format!("{endpoint}: {}", describe(role))),
                Err(e) => report.push(format!("{endpoint}: {e}")),
            }
        }
        fallback.ok_or_else(|| format!("{} wanted; {}", self.attrs.as_str(), report.join("; ")))
    }

    /// Points new connections at host `index` and retires the connections made before; counts a move. The same
    /// host found again retires its connections only when `retire_same` (it was gone: they are dead).
    fn switch(&self, index: usize, retire_same: bool) {
        *lock(&self.complained_at) = None;
        let previous = lock(&self.current).replace(index);
        if previous == Some(index) && !retire_same {
            return;
        }
        // First the mark, then the options: a connection made after the mark but to the old host is refused by
        // its check (`check_new_connection`) or never made.
        *lock(&self.gate.switched_at) = Instant::now();
        self.pool.set_connect_options(self.target.hosts[index].1.clone());
        match previous {
            Some(previous) if previous != index => {
                self.failovers.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(role = ?self.role, from = %self.target.hosts[previous].0,
                    to = %self.target.hosts[index].0, "the database moved to another host; new connections go there");
            }
            Some(_) => {
                tracing::info!(role = ?self.role, host = %self.target.hosts[index].0, "the database host is back")
            }
            None => tracing::info!(role = ?self.role, host = %self.target.hosts[index].0, "database host found"),
        }
        self.changes.send_modify(|n| *n += 1);
    }
}

fn gate(attrs: Option<SessionAttrs>) -> Arc<Gate> {
    Arc::new(Gate { switched_at: Mutex::new(Instant::now()), attrs, nudge: Notify::new() })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn describe(role: HostRole) -> &'static str {
    match (role.in_recovery, role.read_only) {
        (true, _) => "standby",
        (false, true) => "read-only primary",
        (false, false) => "primary",
    }
}

/// Refuses a new connection to a host that does not suit (as a connection error: the request answers 503) and
/// wakes the watch.
async fn check_new_connection(conn: &mut PgConnection, gate: &Gate) -> Result<(), sqlx::Error> {
    let Some(attrs) = gate.attrs else { return Ok(()) };
    let (in_recovery, read_only) = sqlx::query_as::<_, (bool, bool)>(ROLE_SQL).fetch_one(&mut *conn).await?;
    let role = HostRole { in_recovery, read_only };
    if attrs.accepts(role) {
        return Ok(());
    }
    gate.nudge.notify_one();
    Err(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("the database host is a {}, not {}", describe(role), attrs.as_str()),
    )))
}

/// Connects to one host and asks what it is.
async fn probe(options: &PgConnectOptions) -> Result<HostRole, String> {
    let asked = async {
        let mut conn = options.connect().await?;
        let (in_recovery, read_only) = sqlx::query_as::<_, (bool, bool)>(ROLE_SQL).fetch_one(&mut conn).await?;
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(HostRole { in_recovery, read_only })
    };
    match tokio::time::timeout(PROBE_TIMEOUT, asked).await {
        Ok(Ok(role)) => Ok(role),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

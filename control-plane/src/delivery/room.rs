//! The server sender's room: the claimed deliveries it holds (sending, or waiting their turn) in all and per
//! organization, the permits of attempts in flight (in all, and per organization so a tenant whose receivers hold
//! every attempt to its timeout never takes more than its share), and the claim loop's wake-up when room worth a
//! claim comes free for what the last claim had to leave behind (not at every attempt's end), or when a retry this
//! replica recorded comes due (`retries`). Rows are held up to twice what may be in flight: the next claim's rows
//! are at hand when attempts end, so sending never waits for a claim's round trip. An organization whose receivers
//! answer quickly (its attempts' moving mean under [`QUICK_ATTEMPT`]) empties that in less than a claim takes (32
//! attempts of a fraction of a millisecond against a claim's 1.5 ms): it holds up to four times what it may have in
//! flight, and is claimed for again when half of that is left. A slow one keeps the twice, so its rows never wait
//! more than a round of attempts for their turn (their leases would run short: see `attempt::send_one`). Only
//! requests sent are timed. A quick organization whose receivers turn slow may hold rows three rounds: those whose
//! lease would run short are given back when their turn comes, and its room narrows as its mean rises.
//!
//! Capture first: while this replica's capture path is pressed (`capture::writer::Pressure`: a batch's worth of
//! captures waiting for their commit, and 50 ms after), attempts without a rate limit start at most one every
//! [`PRESSED_GAP`], whoever holds them, and go at once when the pressure falls (rate-limited ones keep their
//! slots' pace). Senders are answered before their deliveries are made: a flood (a provider's retry
//! storm after an outage) is acknowledged at the capture path's pace, and the deliveries it owes follow it.

use crate::capture::handoff::SenderRoom;
use crate::capture::writer::Pressure;
use crate::delivery::retries::RetryClock;
use hookflow_shared::OrgId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Attempts in flight at once on one replica.
pub const IN_FLIGHT: usize = 128;
/// Attempts of one organization in flight at once on one replica.
pub const ORG_IN_FLIGHT: usize = 32;
/// Claimed rows one replica holds at most (sending or waiting), in all and per organization (one whose attempts
/// are quick: [`ORG_HELD_QUICK`]). An organization is claimed for again when it holds half of its own or fewer.
const HELD: usize = 2 * IN_FLIGHT;
const ORG_HELD: usize = 2 * ORG_IN_FLIGHT;
const ORG_HELD_QUICK: usize = 4 * ORG_IN_FLIGHT;
/// An organization's attempts whose moving mean (each new one weighing an eighth) is under this are quick.
pub const QUICK_ATTEMPT: Duration = Duration::from_millis(100);
/// While the capture path is pressed, turns start this far apart (1,000 attempts a second on a replica).
pub const PRESSED_GAP: Duration = Duration::from_millis(1);
/// How often a turn waiting for its paced start looks whether the pressure fell.
const PRESSURE_LOOK: Duration = Duration::from_millis(10);
/// Room (in held rows) a claim waits for: one claim's statement serves at least this many attempts.
const CLAIM_AT_FREE: usize = IN_FLIGHT / 4;
/// Capture body bytes one replica holds at most (the first row of a claim is taken whatever its size, so one body
/// may go past it).
const HELD_BYTES: usize = 64 * 1024 * 1024;

/// What the next claim may take.
#[derive(Debug)]
pub struct NextClaim {
    /// Rows in all.
    pub rows: i64,
    /// Rows of one organization (less what it holds).
    pub per_org: i64,
    /// Organizations not to claim for: they hold more than half their room.
    pub busy: Vec<OrgId>,
    /// Rows each organization holds, counted against `per_org`: a quick one's less the room it has past it.
    pub held: Vec<(OrgId, i64)>,
    /// Capture body bytes it may take.
    pub bytes: i64,
}

#[derive(Debug, Default)]
struct OrgRoom {
    held: usize,
    /// Its last claim took all its room: more may be due.
    wants_more: bool,
    sending: Option<Arc<Semaphore>>,
    /// The moving mean of its attempts' durations (`None`: none ended since it held rows).
    attempts_take: Option<Duration>,
}

impl OrgRoom {
    /// The rows it may hold.
    fn room(&self) -> usize {
        if self.attempts_take.is_some_and(|mean| mean < QUICK_ATTEMPT) { ORG_HELD_QUICK } else { ORG_HELD }
    }

    /// Whether it holds more than half its room (not claimed for until it falls to half).
    fn busy(&self) -> bool {
        self.held > self.room() / 2
    }

    /// Notes how a claim left it: busy, it waits to fall to half (`wants_more`); otherwise answers whether the claim
    /// loop should go again now (`more_may_be_due`).
    fn left_by_claim(&mut self, more_may_be_due: bool) -> bool {
        if self.busy() {
            self.wants_more = true;
            return false;
        }
        more_may_be_due
    }

    fn attempt_took(&mut self, took: Duration) {
        self.attempts_take = Some(self.attempts_take.map_or(took, |mean| (mean * 7 + took) / 8));
    }
}

#[derive(Debug, Default)]
struct Held {
    rows: usize,
    bytes: usize,
    by_org: HashMap<OrgId, OrgRoom>,
}

#[derive(Debug)]
pub struct Room {
    sending: Arc<Semaphore>,
    /// Rows held in all, their body bytes, and each organization's.
    held: Mutex<Held>,
    /// The last claim took all it asked: more may be due.
    wants_rows: AtomicBool,
    pub freed: Notify,
    /// When this replica's own retries come due.
    pub retries: RetryClock,
    /// How pressed this replica's capture path is, and when the next paced turn may start.
    captures: Pressure,
    paced_from: Mutex<tokio::time::Instant>,
}

impl Default for Room {
    /// A room that never yields (no capture path beside it).
    fn default() -> Self {
        Self::yielding_to(Pressure::default())
    }
}

impl Room {
    /// A room whose turns yield to the capture path whose pressure `captures` tells.
    pub fn yielding_to(captures: Pressure) -> Self {
        Self {
            sending: Arc::new(Semaphore::new(IN_FLIGHT)),
            held: Mutex::default(),
            wants_rows: AtomicBool::new(false),
            freed: Notify::new(),
            retries: RetryClock::default(),
            captures,
            paced_from: Mutex::new(tokio::time::Instant::now()),
        }
    }

    /// While the capture path is pressed: waits for this attempt's paced start, [`PRESSED_GAP`] after the last
    /// one's, or until the pressure falls. Called with a turn in hand, for rows without a rate limit (those keep the
    /// pace of their slots, which a wait here would make them miss).
    pub async fn yield_to_captures(&self) {
        if !self.captures.pressed() {
            return;
        }
        let start = {
            let mut from = self.paced_from.lock().unwrap_or_else(|e| e.into_inner());
            let start = (*from).max(tokio::time::Instant::now());
            *from = start + PRESSED_GAP;
            start
        };
        while tokio::time::Instant::now() < start && self.captures.pressed() {
            tokio::time::sleep_until(start.min(tokio::time::Instant::now() + PRESSURE_LOOK)).await;
        }
    }
}

/// A held row's turn: its permits; dropped (after the attempt, or by a panic), it gives the row's room back.
#[derive(Debug)]
pub struct Turn {
    room: Arc<Room>,
    org: OrgId,
    bytes: usize,
    /// How long its request took, once it was sent (rows not sent say nothing of the receivers' speed).
    sent: Option<Duration>,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

impl Turn {
    /// Notes that the row's request was sent and took `took` (its organization's attempts are timed by these).
    pub fn sent(&mut self, took: Duration) {
        self.sent = Some(took);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.room.release(self.org, self.bytes, self.sent);
    }
}

impl Room {
    /// What the next claim may take; `None` while less than a claim's worth of room is free (the room's release
    /// then wakes the claim loop).
    pub fn next_claim(&self, max_rows: i64) -> Option<NextClaim> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let free = HELD.saturating_sub(held.rows);
        if free < CLAIM_AT_FREE || (held.bytes >= HELD_BYTES && held.rows > 0) {
            self.wants_rows.store(true, Ordering::Relaxed);
            return None;
        }
        let busy = held.by_org.iter().filter(|(_, r)| r.busy()).map(|(org, _)| *org).collect();
        Some(NextClaim {
            rows: (free as i64).min(max_rows),
            per_org: ORG_HELD as i64,
            busy,
            held: held.by_org.iter().map(|(org, r)| (*org, r.held as i64 - (r.room() - ORG_HELD) as i64)).collect(),
            bytes: HELD_BYTES.saturating_sub(held.bytes).max(1) as i64,
        })
    }

    /// Holds a claim's rows (each one's organization and body bytes, in order) and notes whether it took all it
    /// asked (`full`). The organizations it left holding more than half their room are not claimed for until they
    /// fall to half: the claim loop is woken then (more may be due). One whose room it took whole but which attempts
    /// that ended during the claim brought to half already wakes it at once.
    pub fn hold(&self, rows: &[(OrgId, usize)], asked: &NextClaim, full: bool) {
        self.wants_rows.store(full, Ordering::Relaxed);
        let mut taken: HashMap<OrgId, i64> = HashMap::new();
        for (org, _) in rows {
            *taken.entry(*org).or_default() += 1;
        }
        let mut wake = false;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.rows += rows.len();
        held.bytes += rows.iter().map(|(_, bytes)| bytes).sum::<usize>();
        for (org, n) in taken {
            let before = asked.held.iter().find(|(o, _)| *o == org).map_or(0, |(_, h)| *h);
            let room = held.by_org.entry(org).or_default();
            room.held += n as usize;
            wake |= room.left_by_claim(n + before >= asked.per_org);
        }
        // Those left out as busy (by rows handed over, say) may have had due rows too: woken when they fall to half.
        for org in &asked.busy {
            if let Some(room) = held.by_org.get_mut(org) {
                wake |= room.left_by_claim(true);
            }
        }
        drop(held);
        if wake {
            self.freed.notify_one();
        }
    }

    /// Holds a row the capture path handed over (its organization, its body's bytes) if there is room: its
    /// organization holds fewer than [`ORG_HELD`] rows, and the replica fewer than a claim's worth below [`HELD`]
    /// (handed rows never take the room the claims need for retries and replays) and below [`HELD_BYTES`].
    pub fn try_hold_handed(&self, org: OrgId, bytes: usize) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if !Self::room_for_handed(&held, org) {
            return false;
        }
        held.rows += 1;
        held.bytes += bytes;
        held.by_org.entry(org).or_default().held += 1;
        true
    }

    fn room_for_handed(held: &Held, org: OrgId) -> bool {
        held.rows < HELD - CLAIM_AT_FREE
            && held.bytes < HELD_BYTES
            && held.by_org.get(&org).is_none_or(|room| room.held < room.room())
    }

    /// Waits for a held row's turn to be sent (its organization's share, then the replica's).
    pub async fn turn(self: &Arc<Self>, org: OrgId, bytes: usize) -> Option<Turn> {
        let org_sending = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let room = held.by_org.entry(org).or_default();
            room.sending.get_or_insert_with(|| Arc::new(Semaphore::new(ORG_IN_FLIGHT))).clone()
        };
        let for_org = org_sending.acquire_owned().await.ok()?;
        let for_replica = self.sending.clone().acquire_owned().await.ok()?;
        Some(Turn { room: self.clone(), org, bytes, sent: None, _permits: (for_org, for_replica) })
    }

    /// Gives back a row's room (its turn dropped after `took`), waking the claim loop when room worth a claim came
    /// free for what the last claims left.
    fn release(&self, org: OrgId, bytes: usize, took: Option<Duration>) {
        let wake = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.rows = held.rows.saturating_sub(1);
            held.bytes = held.bytes.saturating_sub(bytes);
            let replica_free = HELD.saturating_sub(held.rows) >= CLAIM_AT_FREE
                && held.bytes < HELD_BYTES
                && self.wants_rows.swap(false, Ordering::Relaxed);
            let mut org_free = false;
            if let Some(room) = held.by_org.get_mut(&org) {
                room.held = room.held.saturating_sub(1);
                if let Some(took) = took {
                    room.attempt_took(took);
                }
                if room.wants_more && !room.busy() {
                    room.wants_more = false;
                    org_free = true;
                }
                if room.held == 0 {
                    held.by_org.remove(&org);
                }
            }
            replica_free || org_free
        };
        if wake {
            self.freed.notify_one();
        }
    }
}

/// The capture path hands over a capture's deliveries while the replica and the organization have room for one
/// more (each is counted in, or given back, when the sender takes it: [`Room::try_hold_handed`]), and it is not
/// pressed: then turns are paced, so rows handed over would wait in memory (most of a flood's, given back at once:
/// the captures in flight together all saw the same room), and are left to the claims instead.
impl SenderRoom for Room {
    fn has_room(&self, org: OrgId) -> bool {
        !self.captures.pressed() && Self::room_for_handed(&self.held.lock().unwrap_or_else(|e| e.into_inner()), org)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_filled_organization_waits_for_half_its_room_then_wakes_the_claims() {
        let room = Arc::new(Room::default());
        let org = OrgId::from(uuid::Uuid::new_v4());
        let asked = room.next_claim(64).expect("empty room claims");
        assert_eq!((asked.rows, asked.per_org), (64, ORG_HELD as i64));
        room.hold(&vec![(org, 10); ORG_HELD], &asked, true);
        // Its receivers are slow (an hour a mean: the instant attempts below never make it quick).
        room.held.lock().expect("lock").by_org.get_mut(&org).expect("held").attempts_take =
            Some(Duration::from_secs(3600));
        let next = room.next_claim(64).expect("the replica has room");
        assert_eq!(next.busy, vec![org]);
        assert_eq!(next.held, vec![(org, ORG_HELD as i64)]);
        // The claim loop goes on after a full claim; the organization being busy, it takes nothing.
        room.hold(&[], &next, false);
        // Only ORG_IN_FLIGHT of its rows get a turn at once.
        let mut turns = Vec::new();
        for _ in 0..ORG_IN_FLIGHT {
            turns.push(room.turn(org, 10).await.expect("a turn"));
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), room.turn(org, 10)).await;
        assert!(waiting.is_err(), "the organization's share is taken");
        for (n, turn) in turns.drain(..).enumerate() {
            drop(turn);
            let woken = tokio::time::timeout(std::time::Duration::from_millis(5), room.freed.notified()).await;
            // Woken once, when what it holds falls to ORG_IN_FLIGHT (the 32nd release), not before or after.
            assert_eq!(woken.is_ok(), n + 1 == ORG_HELD - ORG_IN_FLIGHT, "release {n}");
        }
        assert!(room.next_claim(64).expect("room").busy.is_empty());
    }

    #[tokio::test]
    async fn an_organization_with_quick_attempts_holds_more_and_is_claimed_for_before_it_runs_dry() {
        let room = Arc::new(Room::default());
        let org = OrgId::from(uuid::Uuid::new_v4());
        let asked = room.next_claim(64).expect("empty room claims");
        // Unknown yet, it gets a slow organization's room.
        room.hold(&vec![(org, 10); ORG_HELD], &asked, false);
        assert_eq!(room.next_claim(64).expect("room").busy, vec![org]);
        // Its first request took 0.3 ms: it is quick, so it holds half of its wider room and is claimed for now.
        let mut turn = room.turn(org, 10).await.expect("a turn");
        turn.sent(Duration::from_micros(300));
        drop(turn);
        tokio::time::timeout(Duration::from_millis(50), room.freed.notified()).await.expect("woken at once");
        let next = room.next_claim(64).expect("room");
        assert!(next.busy.is_empty());
        let held = ORG_HELD as i64 - 1;
        // What the claim may take of it: per_org less what counts against it, up to its wider room.
        let allowed = next.per_org - next.held.iter().find(|(o, _)| *o == org).expect("held").1;
        assert_eq!(held + allowed, ORG_HELD_QUICK as i64);
        // A claim cut short by its own limit (64 rows of the 65 allowed) still leaves it busy, to be woken when it
        // falls to half: the claim loop is not left waiting for its poll.
        room.hold(&vec![(org, 10); 64], &next, true);
        let after = room.next_claim(64).expect("room");
        assert_eq!(after.busy, vec![org]);
        // The loop goes on after a full claim, which takes nothing of the busy organization.
        room.hold(&[], &after, false);
        let mut woken_at = None;
        for n in 1..=64 {
            drop(room.turn(org, 10).await.expect("a turn"));
            if tokio::time::timeout(Duration::from_millis(5), room.freed.notified()).await.is_ok() {
                woken_at.get_or_insert(n);
            }
        }
        // 127 held: woken when it falls to 64, half its room.
        assert_eq!(woken_at, Some(127 - ORG_HELD_QUICK / 2));
    }

    #[tokio::test(start_paused = true)]
    async fn turns_yield_to_a_pressed_capture_path_and_go_at_once_when_it_falls() {
        use crate::capture::writer::PRESSED_AT;
        let captures = Pressure::default();
        let room = Arc::new(Room::yielding_to(captures.clone()));
        let org = OrgId::from(uuid::Uuid::new_v4());
        let attempt = |room: Arc<Room>| async move {
            let turn = room.turn(org, 10).await.expect("a turn");
            room.yield_to_captures().await;
            drop(turn);
            tokio::time::Instant::now()
        };
        let started = tokio::time::Instant::now();
        for _ in 0..5 {
            attempt(room.clone()).await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO, "unpressed, turns go at once");
        captures.set(PRESSED_AT - 1);
        attempt(room.clone()).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "below a batch's worth of waiting captures, too");
        captures.set(PRESSED_AT);
        let started = tokio::time::Instant::now();
        for _ in 0..5 {
            attempt(room.clone()).await;
        }
        assert_eq!(started.elapsed(), 4 * PRESSED_GAP, "pressed, each starts a gap after the last");
        assert!(!room.has_room(org), "pressed, the capture path hands nothing over");
        // Thirty turns at once are paced up to 30 gaps ahead; the pressure falls after 5 ms and the rest go then.
        let started = tokio::time::Instant::now();
        let turns: Vec<_> = (0..30).map(|_| tokio::spawn(attempt(room.clone()))).collect();
        tokio::time::sleep(Duration::from_millis(5)).await;
        captures.set(0);
        assert!(room.has_room(OrgId::from(uuid::Uuid::new_v4())), "unpressed, it does again");
        let mut last = started;
        for turn in turns {
            last = last.max(turn.await.expect("task"));
        }
        assert!(last - started <= Duration::from_millis(5) + PRESSURE_LOOK, "{:?}", last - started);
        assert!(last - started > Duration::from_millis(5), "some waited for the pressure to fall");
    }

    #[tokio::test]
    async fn an_organization_made_busy_by_handed_rows_is_claimed_for_when_it_falls_to_half() {
        let room = Arc::new(Room::default());
        let org = OrgId::from(uuid::Uuid::new_v4());
        while room.try_hold_handed(org, 10) {}
        // A claim leaves it out as busy and takes nothing.
        let next = room.next_claim(64).expect("room");
        assert_eq!(next.busy, vec![org]);
        room.hold(&[], &next, false);
        let mut woken_at = None;
        for n in 1..=ORG_HELD {
            drop(room.turn(org, 10).await.expect("a turn"));
            if tokio::time::timeout(Duration::from_millis(5), room.freed.notified()).await.is_ok() {
                woken_at.get_or_insert(n);
            }
        }
        // Its due rows (retries, filtered destinations) are claimed once it holds half its room.
        assert_eq!(woken_at, Some(ORG_HELD / 2));
    }

    #[tokio::test]
    async fn held_bytes_bound_the_claims_and_a_dropped_turn_gives_its_room_back() {
        let room = Arc::new(Room::default());
        let org = OrgId::from(uuid::Uuid::new_v4());
        let asked = room.next_claim(64).expect("empty room claims");
        assert_eq!(asked.bytes, HELD_BYTES as i64);
        // One body past the budget (a claim's first row is taken whatever its size): no claim until it is sent.
        room.hold(&[(org, HELD_BYTES + 1)], &asked, false);
        assert!(room.next_claim(64).is_none());
        let turn = room.turn(org, HELD_BYTES + 1).await.expect("a turn");
        let panicked = tokio::spawn(async move {
            let _turn = turn;
            panic!("an attempt that panics");
        });
        assert!(panicked.await.is_err());
        // The panic dropped the turn: the room is whole again and the claim loop was woken.
        tokio::time::timeout(std::time::Duration::from_millis(50), room.freed.notified()).await.expect("woken");
        let next = room.next_claim(64).expect("room again");
        assert_eq!((next.bytes, next.held.len()), (HELD_BYTES as i64, 0));
    }

    #[tokio::test]
    async fn handed_rows_count_in_and_stop_at_an_organization_s_share_and_the_claims_room() {
        let room = Arc::new(Room::default());
        let (flooding, other) = (OrgId::from(uuid::Uuid::new_v4()), OrgId::from(uuid::Uuid::new_v4()));
        assert!(room.has_room(flooding));
        // A flood of one tenant's captures passed the first look together: only its share is taken.
        let taken = (0..10 * ORG_HELD).filter(|_| room.try_hold_handed(flooding, 10)).count();
        assert_eq!(taken, ORG_HELD);
        assert!(!room.has_room(flooding), "a full organization's captures are left to the claims");
        assert!(room.has_room(other), "another organization's are still handed over");
        // The claims see the handed rows as held.
        let next = room.next_claim(64).expect("the replica has room");
        assert_eq!((next.busy, next.held), (vec![flooding], vec![(flooding, ORG_HELD as i64)]));
        // Many tenants together stop a claim's worth short of the replica's room: the claims always get a turn.
        let tenants: Vec<OrgId> = (0..10).map(|_| OrgId::from(uuid::Uuid::new_v4())).collect();
        let more =
            tenants.iter().map(|t| (0..ORG_HELD).filter(|_| room.try_hold_handed(*t, 10)).count()).sum::<usize>();
        assert_eq!(ORG_HELD + more, HELD - CLAIM_AT_FREE);
        assert!(!room.has_room(OrgId::from(uuid::Uuid::new_v4())));
        assert!(room.next_claim(64).is_some_and(|next| next.rows == CLAIM_AT_FREE as i64));
        drop(room.turn(flooding, 10).await.expect("a turn"));
        assert!(room.try_hold_handed(other, 10), "a row sent makes room for the next");
    }
}

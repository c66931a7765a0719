//! The hub: many conversations, one retriever. Sessions feed the daemon's retriever
//! thread next to (or instead of) the STT pipe, and its results reach the clients that
//! own or subscribe to them. The socket API ([`listen`], `docs/protocol.md`) is one user
//! of this module; another input (Wyoming) is another: both go through [`Hub`].
//!
//! Why one retriever for every session: the embedder is the scarce resource (one embed
//! costs milliseconds on the board; two threads embedding at once make both late), and
//! the [scheduler](crate::scheduler) already decides the order of work. Each session is
//! one of its *lanes* with its own utterance state; the policy (finals first, newest
//! partial per lane, lanes in turn, idle embeds in turn) lives there, once.
//!
//! The seam, for another module of primd:
//! ```ignore
//! let hub: Hub = ...;                          // from hub::Inbox::new / the run command
//! let mut s = hub.open_session("wyoming-1")?;  // a lane; results go to subscribers
//! s.partial(1, "what is the capital")?;
//! s.final_(1, "what is the capital of France")?;
//! drop(s);                                     // closes it (an open turn is abandoned)
//!
//! let mut c = hub.connect("my-agent")?;        // a client: its own bounded result queue
//! c.subscribe("wyoming-1", false)?;            // or "*"; or own sessions: c.open_session
//! let d: Delivery = c.results().recv()?;       // tagged with session and turn
//! d.encode(&mut buf)?;                         // the protocol's JSON line
//! ```
//! Turn rules are applied by the [`Session`] handle itself (a session has exactly one
//! sender): a message for a newer turn abandons the open one, one for an older or an
//! ended turn is ignored (counted). So the retriever thread sees only plain lane
//! operations and keeps no per-turn bookkeeping.
//!
//! What crosses threads: session and client registrations in a mutex touched by
//! connection threads only (never the retriever); lane operations and deliveries on
//! bounded channels; counters as relaxed atomics. The retriever's side (`table`)
//! routes each result to the lane's owner and subscribers with `try_send` on each
//! client's bounded queue: speculative results only while fewer than
//! [`SPECULATIVE_ROOM`] wait, and a final that does not fit disconnects that client
//! (logged, counted), so a client that never reads costs the others nothing.

pub mod listen;
pub(crate) mod table;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};
use serde::Serialize;

use crate::index::Index;
use crate::index::live::{LiveIndex, ReloadError};
use crate::input::{Event, EventKind, to_text};
use crate::output::Outbound;

/// Events waiting between reader and retriever. Small: the retriever drains it whole
/// every time it wakes, and a full queue slows the reader rather than growing.
pub const EVENT_QUEUE: usize = 64;

/// Speculative events are only sent while fewer than this many messages wait for the
/// daemon's writer, and speculative results only queued for a client while fewer than
/// this many wait: when the output lags they are the first to go, and finals keep the
/// rest of the backlog.
pub const SPECULATIVE_ROOM: usize = 4;

/// What reaches the retriever from the reader.
// Events are moved by value on purpose: boxing them would allocate per partial, while
// the bounded channel preallocates its slots once.
#[allow(clippy::large_enum_variant)]
pub enum Inbound {
    Event(Event),
    /// From the socket hub's handles ([`crate::hub`]).
    Hub(HubMsg),
    /// No more input (end of stream or read error).
    End,
}

/// Counts kept by the retriever and the writer: relaxed atomics, so the supervisor can
/// read them whatever state those threads are in (a writer blocked for good).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) utterances: AtomicU64,
    pub(crate) finals_dropped: AtomicU64,
    pub(crate) speculative_sent: AtomicU64,
    pub(crate) speculative_dropped: AtomicU64,
    pub(crate) written: AtomicU64,
    /// Messages that could not be serialised (logged, skipped).
    pub(crate) failed: AtomicU64,
}

/// Sessions open at once (past it, opening one is refused).
pub const MAX_SESSIONS: usize = 64;
/// Clients connected at once.
pub const MAX_CLIENTS: usize = 128;
/// Subscriptions of one client.
pub const MAX_SUBSCRIPTIONS: usize = 16;
/// Results waiting for one client.
pub const CLIENT_QUEUE: usize = 64;
/// Longest session name, in bytes.
pub const MAX_SESSION_NAME: usize = 64;
/// The STT pipe's session.
pub const STT_SESSION: &str = "stt";

pub type SessionName = heapless::String<MAX_SESSION_NAME>;

/// Why the hub refused something.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HubError {
    #[error("the daemon has stopped")]
    Stopped,
    #[error("a session name is 1 to {MAX_SESSION_NAME} bytes")]
    BadName,
    #[error("session {0:?} is open already (owned by another connection)")]
    SessionOwned(String),
    #[error("{MAX_SESSIONS} sessions are open: no more")]
    TooManySessions,
    #[error("{MAX_CLIENTS} clients are connected: no more")]
    TooManyClients,
    #[error("at most {MAX_SUBSCRIPTIONS} subscriptions per client")]
    TooManySubscriptions,
    #[error("\"stt\" is the STT pipe's session, and this daemon reads no pipe (--input none)")]
    NoSttPipe,
}

impl HubError {
    /// The protocol's error code.
    pub fn code(&self) -> &'static str {
        match self {
            HubError::Stopped => "stopped",
            HubError::BadName => "bad_message",
            HubError::SessionOwned(_) => "session_owned",
            HubError::TooManySessions => "too_many_sessions",
            HubError::TooManyClients => "too_many_clients",
            HubError::TooManySubscriptions => "too_many_subscriptions",
            HubError::NoSttPipe => "unknown_session",
        }
    }
}

fn session_name(name: &str) -> Result<SessionName, HubError> {
    if name.is_empty() {
        return Err(HubError::BadName);
    }
    SessionName::try_from(name).map_err(|_| HubError::BadName)
}

/// One result for one client: a message of the retriever, the session and turn it
/// answers, and the index its passages are looked up in.
#[derive(Clone)]
pub struct Delivery {
    pub session: SessionName,
    pub turn: u64,
    pub index: Arc<Index>,
    pub msg: Outbound,
}

impl Delivery {
    /// Appends the protocol's JSON line (`primd run`'s stdout line plus `session` and
    /// `turn`).
    pub fn encode(&self, out: &mut Vec<u8>) -> anyhow::Result<()> {
        let tag = crate::output::Tag {
            session: &self.session,
            turn: self.turn,
        };
        crate::output::encode_tagged(out, &self.index, &self.msg, Some(tag))
    }

    pub fn is_final(&self) -> bool {
        matches!(self.msg, Outbound::Final { .. })
    }
}

/// What the hub's handles tell the retriever thread (internal: built by the handles).
// By value like the daemon's other messages (an event's text is inline).
#[allow(clippy::large_enum_variant)]
#[doc(hidden)]
pub enum HubMsg {
    Open {
        lane: usize,
        name: SessionName,
        owner: Option<u64>,
    },
    Transcript {
        lane: usize,
        turn: u64,
        ev: Event,
    },
    EndOfSpeech {
        lane: usize,
        turn: u64,
        at: Instant,
    },
    Abandon {
        lane: usize,
    },
    /// Forget the lane's conversation.
    Reset {
        lane: usize,
    },
    /// The agent sets the lane's conversation topic (`""`: clears it).
    Topic {
        lane: usize,
        text: String,
    },
    /// The lane's current turn may (not) use its conversation, and its `context`
    /// budget if the turn set one.
    Context {
        lane: usize,
        on: bool,
        tokens: Option<u32>,
    },
    Close {
        lane: usize,
    },
    Connect {
        client: u64,
        tx: Sender<Delivery>,
        info: Arc<ClientInfo>,
    },
    Disconnect {
        client: u64,
    },
    Subscribe {
        client: u64,
        /// None: every session.
        session: Option<SessionName>,
        speculative: bool,
    },
    Unsubscribe {
        client: u64,
        session: Option<SessionName>,
    },
}

/// A client's counters, shared by its handle, the retriever and `stats`.
pub struct ClientInfo {
    pub id: u64,
    pub name: String,
    /// Sessions it owns now.
    pub sessions: AtomicU64,
    pub delivered: AtomicU64,
    pub speculative_dropped: AtomicU64,
    pub finals_dropped: AtomicU64,
    /// A final did not fit its queue: the hub disconnected it.
    pub overflowed: AtomicBool,
    /// primd's own plumbing (the Wyoming printer and reply readers), not a client of
    /// the socket API: left out of `stats` and of the [`MAX_CLIENTS`] limit.
    internal: bool,
    /// Its queue, to count what waits (never sent on through here).
    queue: Sender<Delivery>,
    /// Called (once, from the retriever thread) when it overflowed: e.g. shuts its
    /// socket down so its writer thread stops waiting on it.
    on_overflow: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl ClientInfo {
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn overflow(&self) {
        self.overflowed.store(true, Ordering::Relaxed);
        let hook = self.on_overflow.lock().ok().and_then(|mut h| h.take());
        if let Some(hook) = hook {
            hook();
        }
    }
}

/// Registrations: which lane each session has, which clients are connected.
struct Registry {
    /// By lane (lane 0 is the STT pipe's).
    lanes: Vec<Option<SessionName>>,
    clients: Vec<Arc<ClientInfo>>,
    next_client: u64,
}

/// Counters of the hub, for `stats`.
#[derive(Debug, Default)]
pub(crate) struct HubCounters {
    pub(crate) stale_turns_ignored: AtomicU64,
    pub(crate) disconnects_overflow: AtomicU64,
    pub(crate) swaps: AtomicU64,
}

pub(crate) struct Shared {
    registry: Mutex<Registry>,
    pub(crate) counters: HubCounters,
    pub(crate) daemon: Arc<Counters>,
    live: Arc<LiveIndex>,
    /// The daemon reads an STT pipe (session `stt`); set when it starts
    /// ([`crate::daemon::run_hub`]).
    pub(crate) stt_pipe: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        // Every update is a single assignment or push: a poisoned lock is still usable.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The hub's handle: cloneable, for any thread. Opens sessions, connects clients,
/// reloads the index and reads the counters.
#[derive(Clone)]
pub struct Hub {
    tx: Sender<Inbound>,
    shared: Arc<Shared>,
}

/// The daemon's inbound channel with the hub around it: made before the daemon runs
/// ([`Inbox::new`]), handed to [`crate::daemon::run_hub`]; [`Inbox::hub`] gives the
/// handles the listeners and other inputs use.
pub struct Inbox {
    pub(crate) tx: Sender<Inbound>,
    pub(crate) rx: Receiver<Inbound>,
    pub(crate) shared: Arc<Shared>,
}

impl Inbox {
    pub fn new(live: Arc<LiveIndex>) -> Inbox {
        let (tx, rx) = bounded(EVENT_QUEUE);
        let mut lanes = vec![None; MAX_SESSIONS + 1];
        lanes[0] = Some(SessionName::try_from(STT_SESSION).expect("short"));
        Inbox {
            tx,
            rx,
            shared: Arc::new(Shared {
                registry: Mutex::new(Registry {
                    lanes,
                    clients: Vec::new(),
                    next_client: 1,
                }),
                counters: HubCounters::default(),
                daemon: Arc::new(Counters::default()),
                live,
                stt_pipe: AtomicBool::new(true),
            }),
        }
    }

    pub fn hub(&self) -> Hub {
        Hub {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Hub {
    /// Opens session `name` with no owner: its results go to the clients subscribed to
    /// it (or to `*`). For inputs that only feed (Wyoming, the proxy).
    pub fn open_session(&self, name: &str) -> Result<Session, HubError> {
        self.open(name, None)
    }

    fn open(&self, name: &str, owner: Option<&Arc<ClientInfo>>) -> Result<Session, HubError> {
        let name = session_name(name)?;
        let lane = {
            let mut reg = self.shared.lock();
            if reg.lanes.iter().flatten().any(|n| *n == name) {
                return Err(HubError::SessionOwned(name.to_string()));
            }
            let lane = (1..reg.lanes.len())
                .find(|&l| reg.lanes[l].is_none())
                .ok_or(HubError::TooManySessions)?;
            reg.lanes[lane] = Some(name.clone());
            lane
        };
        let session = Session {
            name: name.clone(),
            lane,
            newest: None,
            open: false,
            options: None,
            tx: self.tx.clone(),
            shared: self.shared.clone(),
            owner: owner.cloned(),
        };
        let msg = HubMsg::Open {
            lane,
            name,
            owner: owner.map(|o| o.id),
        };
        session.send(msg)?; // on failure, dropping `session` frees the lane
        if let Some(o) = owner {
            o.sessions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(session)
    }

    /// Connects a client named `name` (for `stats`): a bounded queue of
    /// [`CLIENT_QUEUE`] results that the client must keep reading.
    pub fn connect(&self, name: &str) -> Result<Client, HubError> {
        self.connect_with(name, None)
    }

    /// [`connect`](Self::connect) for primd's own plumbing (another input reading its
    /// sessions' results): a client like any other for the retriever, but not one of
    /// the socket API's, so `stats` does not list it and it takes no place among the
    /// [`MAX_CLIENTS`].
    pub fn connect_internal(&self, name: &str) -> Result<Client, HubError> {
        self.register(name, None, true)
    }

    /// [`connect`](Self::connect), with a hook the retriever calls once if the client
    /// overflows (a final did not fit): e.g. shut its socket down.
    pub fn connect_with(
        &self,
        name: &str,
        on_overflow: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<Client, HubError> {
        self.register(name, on_overflow, false)
    }

    fn register(
        &self,
        name: &str,
        on_overflow: Option<Box<dyn FnOnce() + Send>>,
        internal: bool,
    ) -> Result<Client, HubError> {
        let (tx, rx) = bounded(CLIENT_QUEUE);
        let info = {
            let mut reg = self.shared.lock();
            if !internal && reg.clients.iter().filter(|c| !c.internal).count() >= MAX_CLIENTS {
                return Err(HubError::TooManyClients);
            }
            let id = reg.next_client;
            reg.next_client += 1;
            let info = Arc::new(ClientInfo {
                id,
                name: name.chars().take(128).collect(),
                sessions: AtomicU64::new(0),
                delivered: AtomicU64::new(0),
                speculative_dropped: AtomicU64::new(0),
                finals_dropped: AtomicU64::new(0),
                overflowed: AtomicBool::new(false),
                internal,
                queue: tx.clone(),
                on_overflow: Mutex::new(on_overflow),
            });
            reg.clients.push(info.clone());
            info
        };
        let client = Client {
            hub: self.clone(),
            info: info.clone(),
            results: rx,
            subscriptions: heapless::Vec::new(),
        };
        let id = info.id;
        self.send(HubMsg::Connect {
            client: id,
            tx,
            info,
        })?;
        Ok(client)
    }

    /// What SIGHUP does: validates the index file again and stages it for the next
    /// utterance boundary; on error the served index stays.
    pub fn reload(&self) -> Result<Arc<Index>, ReloadError> {
        let r = self.shared.live.reload();
        match &r {
            Ok(ix) => log::info!(
                "reload asked on the socket: {:?} is valid ({} passages): swapping it in at \
                 the next utterance boundary",
                self.shared.live.path(),
                ix.len()
            ),
            Err(e) => log::error!("reload asked on the socket refused, still serving: {e}"),
        }
        r
    }

    /// The index being served.
    pub fn index(&self) -> Arc<Index> {
        self.shared.live.current()
    }

    /// The counters, as `{"cmd":"stats"}` replies them.
    pub fn stats(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let index = self.index();
        let reg = self.shared.lock();
        let d = &self.shared.daemon;
        let h = &self.shared.counters;
        Stats {
            utterances: get(&d.utterances),
            sessions: reg.lanes.iter().skip(1).flatten().count(),
            clients: reg.clients.iter().filter(|c| !c.internal).count(),
            index: IndexStats {
                path: index.path().display().to_string(),
                passages: index.len(),
            },
            swaps: get(&h.swaps),
            stale_turns_ignored: get(&h.stale_turns_ignored),
            disconnects_overflow: get(&h.disconnects_overflow),
            stdout_finals_dropped: get(&d.finals_dropped),
            stdout_speculative_dropped: get(&d.speculative_dropped),
            clients_detail: reg
                .clients
                .iter()
                .filter(|c| !c.internal)
                .map(|c| ClientStats {
                    id: c.id,
                    name: c.name.clone(),
                    sessions: get(&c.sessions),
                    queued: c.queued(),
                    delivered: get(&c.delivered),
                    speculative_dropped: get(&c.speculative_dropped),
                    finals_dropped: get(&c.finals_dropped),
                })
                .collect(),
        }
    }

    fn send(&self, msg: HubMsg) -> Result<(), HubError> {
        self.tx
            .send(Inbound::Hub(msg))
            .map_err(|_| HubError::Stopped)
    }

    /// Forgets the STT pipe's conversation (a kiosk's controller: the visitor left);
    /// refused when the daemon reads no pipe (`--input none`).
    pub fn reset_stt(&self) -> Result<(), HubError> {
        if !self.shared.stt_pipe.load(Ordering::Relaxed) {
            return Err(HubError::NoSttPipe);
        }
        self.send(HubMsg::Reset {
            lane: crate::scheduler::STT_LANE,
        })
    }

    /// Sets the STT pipe's conversation topic (`""`: clears it).
    pub fn set_stt_topic(&self, text: &str) -> Result<(), HubError> {
        self.send(HubMsg::Topic {
            lane: crate::scheduler::STT_LANE,
            text: text.to_string(),
        })
    }
}

/// `{"cmd":"stats"}`.
#[derive(Debug, Serialize)]
pub struct Stats {
    /// Utterances answered, all sessions (the STT pipe's included).
    pub utterances: u64,
    /// Sessions open (the STT pipe's not counted).
    pub sessions: usize,
    /// Clients of the socket API connected (primd's own Wyoming plumbing not counted).
    pub clients: usize,
    pub index: IndexStats,
    /// Indexes swapped in since start.
    pub swaps: u64,
    pub stale_turns_ignored: u64,
    pub disconnects_overflow: u64,
    /// The STT pipe's stdout lagged: results not written.
    pub stdout_finals_dropped: u64,
    pub stdout_speculative_dropped: u64,
    pub clients_detail: Vec<ClientStats>,
}

#[derive(Debug, Serialize)]
pub struct IndexStats {
    pub path: String,
    pub passages: usize,
}

#[derive(Debug, Serialize)]
pub struct ClientStats {
    pub id: u64,
    pub name: String,
    pub sessions: u64,
    pub queued: usize,
    pub delivered: u64,
    pub speculative_dropped: u64,
    pub finals_dropped: u64,
}

/// A turn's own settings from its message (docs/protocol.md): `"context": false`
/// retrieves it without its conversation; `"context_tokens": N` sets its `context`
/// budget in word pieces (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnOptions {
    pub context: bool,
    pub context_tokens: Option<u32>,
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            context: true,
            context_tokens: None,
        }
    }
}

/// A session: one conversation's transcripts, turn by turn. Dropping it closes the
/// session (an open turn is abandoned: no result).
pub struct Session {
    name: SessionName,
    lane: usize,
    /// Newest turn seen, and whether it is still open.
    newest: Option<u64>,
    open: bool,
    /// Settings for the next message's turn ([`Session::set_options`]).
    options: Option<TurnOptions>,
    tx: Sender<Inbound>,
    shared: Arc<Shared>,
    owner: Option<Arc<ClientInfo>>,
}

/// What became of a transcript sent on a [`Session`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Handed to the retriever.
    Yes,
    /// For an older turn than the newest, or one that ended: ignored (counted).
    StaleTurn,
}

impl Session {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The newest hypothesis of turn `turn` (the whole text so far, not a delta).
    pub fn partial(&mut self, turn: u64, text: &str) -> Result<Taken, HubError> {
        self.transcript(turn, EventKind::Partial, text)
    }

    /// The final transcript of turn `turn`: ends it; its result follows.
    pub fn final_(&mut self, turn: u64, text: &str) -> Result<Taken, HubError> {
        self.transcript(turn, EventKind::Final, text)
    }

    /// Forgets the session's conversation: its next turn is retrieved alone (a turn in
    /// progress goes on).
    pub fn reset(&self) -> Result<(), HubError> {
        self.send(HubMsg::Reset { lane: self.lane })
    }

    /// Sets the session's conversation topic, what the agent just answered about: the
    /// next turns that lean on earlier ones are searched with it (`""`: clears it; the
    /// earlier turns stay remembered).
    pub fn set_topic(&self, text: &str) -> Result<(), HubError> {
        self.send(HubMsg::Topic {
            lane: self.lane,
            text: text.to_string(),
        })
    }

    /// Settings of the next message's turn, for that turn only: retrieved with its
    /// conversation's context (the default) or without it (`"context": false`), and
    /// its `context` budget (`"context_tokens"`; `None`: the daemon's).
    pub fn set_options(&mut self, options: TurnOptions) {
        self.options = Some(options);
    }

    /// Sends the settings made by [`set_options`](Self::set_options), once the turn
    /// rules have passed (an abandon they send comes first).
    fn send_context(&mut self) -> Result<(), HubError> {
        match self.options.take() {
            Some(o) => self.send(HubMsg::Context {
                lane: self.lane,
                on: o.context,
                tokens: o.context_tokens,
            }),
            None => Ok(()),
        }
    }

    /// Turn `turn` ended without a final text: its newest partial is the final.
    pub fn end_of_speech(&mut self, turn: u64) -> Result<Taken, HubError> {
        if !self.turn_rules(turn)? {
            self.options = None;
            return Ok(Taken::StaleTurn);
        }
        self.open = false;
        self.send_context()?;
        self.send(HubMsg::EndOfSpeech {
            lane: self.lane,
            turn,
            at: Instant::now(),
        })?;
        Ok(Taken::Yes)
    }

    fn transcript(&mut self, turn: u64, kind: EventKind, text: &str) -> Result<Taken, HubError> {
        if !self.turn_rules(turn)? {
            self.options = None;
            return Ok(Taken::StaleTurn);
        }
        self.open = kind == EventKind::Partial;
        self.send_context()?;
        let ev = Event {
            kind,
            text: to_text(text.trim()).0,
            t: None,
            received: Instant::now(),
            line: 0,
        };
        self.send(HubMsg::Transcript {
            lane: self.lane,
            turn,
            ev,
        })?;
        Ok(Taken::Yes)
    }

    /// Newer turn: abandons the open one. Older, or ended: false.
    fn turn_rules(&mut self, turn: u64) -> Result<bool, HubError> {
        match self.newest {
            Some(n) if turn < n || (turn == n && !self.open) => {
                self.shared
                    .counters
                    .stale_turns_ignored
                    .fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Some(n) if turn > n && self.open => {
                self.open = false;
                self.send(HubMsg::Abandon { lane: self.lane })?;
                self.newest = Some(turn);
                Ok(true)
            }
            _ => {
                self.newest = Some(turn);
                Ok(true)
            }
        }
    }

    fn send(&self, msg: HubMsg) -> Result<(), HubError> {
        self.tx
            .send(Inbound::Hub(msg))
            .map_err(|_| HubError::Stopped)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The close is queued before the lane is freed, so a session that reuses the
        // lane is opened after it on the (FIFO) channel.
        let _ = self.send(HubMsg::Close { lane: self.lane });
        self.shared.lock().lanes[self.lane] = None;
        if let Some(o) = &self.owner {
            o.sessions.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A client: results of its own sessions and of those it subscribes to, on a bounded
/// queue it must keep reading ([`results`](Self::results)). Dropping it disconnects.
pub struct Client {
    hub: Hub,
    info: Arc<ClientInfo>,
    results: Receiver<Delivery>,
    subscriptions: heapless::Vec<(Option<SessionName>, bool), MAX_SUBSCRIPTIONS>,
}

impl Client {
    pub fn id(&self) -> u64 {
        self.info.id
    }

    pub fn info(&self) -> &Arc<ClientInfo> {
        &self.info
    }

    /// Opens session `name` owned by this client: its finals come here (speculative
    /// results too once subscribed with `speculative`).
    pub fn open_session(&self, name: &str) -> Result<Session, HubError> {
        self.hub.open(name, Some(&self.info))
    }

    /// Also receive the results of session `session` (`"*"`: every session);
    /// `speculative`: the speculative ones too. Subscribing again updates it.
    pub fn subscribe(&mut self, session: &str, speculative: bool) -> Result<(), HubError> {
        let pattern = pattern(session)?;
        match self.subscriptions.iter_mut().find(|s| s.0 == pattern) {
            Some(s) => s.1 = speculative,
            None => self
                .subscriptions
                .push((pattern.clone(), speculative))
                .map_err(|_| HubError::TooManySubscriptions)?,
        }
        self.hub.send(HubMsg::Subscribe {
            client: self.info.id,
            session: pattern,
            speculative,
        })
    }

    pub fn unsubscribe(&mut self, session: &str) -> Result<(), HubError> {
        let pattern = pattern(session)?;
        self.subscriptions.retain(|s| s.0 != pattern);
        self.hub.send(HubMsg::Unsubscribe {
            client: self.info.id,
            session: pattern,
        })
    }

    /// Results for this client, tagged with session and turn.
    pub fn results(&self) -> &Receiver<Delivery> {
        &self.results
    }

    /// The hub disconnected this client: a final did not fit its queue.
    pub fn overflowed(&self) -> bool {
        self.info.overflowed.load(Ordering::Relaxed)
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.hub.send(HubMsg::Disconnect {
            client: self.info.id,
        });
        self.hub
            .shared
            .lock()
            .clients
            .retain(|c| c.id != self.info.id);
    }
}

fn pattern(session: &str) -> Result<Option<SessionName>, HubError> {
    if session == "*" {
        Ok(None)
    } else {
        session_name(session).map(Some)
    }
}

#[cfg(test)]
mod tests;

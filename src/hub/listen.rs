//! `primd run --listen`: the socket API (`docs/protocol.md`) over a Unix socket or TCP.
//!
//! Per connection two threads, so that nothing a client does (or fails to do) reaches
//! anyone else:
//! - the **reader** (the connection's thread) cuts frames with the bounded line reader
//!   ([`MAX_FRAME_BYTES`]), parses them (`primd_input::protocol`), answers commands and
//!   feeds the client's sessions through the [`Hub`] handles. Bad frames get an error
//!   reply and reading goes on. Sending a transcript may wait for room on the
//!   retriever's bounded channel: that slows this client's reading only.
//! - the **writer** writes the greeting, the replies (a queue of [`REPLY_QUEUE`]; a client
//!   that sends faster than it reads them is disconnected) and the results the
//!   retriever delivered to the client's own queue, one `write_all` per line. When the
//!   client stops reading, the retriever disconnects it at the first final that does
//!   not fit: the hook shuts the socket down, which unblocks this writer.
//!
//! The connection ends when the client closes it (or the socket fails): its sessions are
//! closed (an open turn is abandoned), the results already due are still written, then
//! the socket is closed.
//!
//! Addresses: `unix:PATH` (a stale socket file, one nobody listens on, is replaced; any
//! other file there is an error) and `tcp:HOST:PORT` (loopback only unless
//! `allow_remote`: the protocol has no authentication).

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, never, select};
use serde_json::{Value, json};

use super::{Client, Delivery, Hub, HubError, Session, Taken, TurnOptions};
use crate::input::protocol::{
    self, Command, MAX_FRAME_BYTES, PROTOCOL_VERSION, Refusal, Request, TopicSource, What,
};
use crate::input::{LineReader, Mode};

/// Replies waiting to be written to one client.
pub const REPLY_QUEUE: usize = 64;

/// Where to listen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Unix(PathBuf),
    Tcp(String),
}

impl std::str::FromStr for ListenAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a path, e.g. unix:/run/primd/primd.sock".into());
            }
            Ok(ListenAddr::Unix(PathBuf::from(path)))
        } else if let Some(addr) = s.strip_prefix("tcp:") {
            if !addr.contains(':') {
                return Err(format!(
                    "tcp:{addr}: needs HOST:PORT, e.g. tcp:127.0.0.1:7700"
                ));
            }
            Ok(ListenAddr::Tcp(addr.to_string()))
        } else {
            Err(format!(
                "{s:?}: listen on unix:PATH or tcp:HOST:PORT (e.g. unix:/run/primd/primd.sock)"
            ))
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            ListenAddr::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// A bound socket, not yet serving. A Unix socket's file is removed when it (or the
/// [`Serving`] guard it becomes) is dropped.
pub struct Listener {
    kind: Kind,
    file: Option<SocketFile>,
    /// What it is bound to (a TCP port 0 resolved), for logs and tests.
    pub local: ListenAddr,
}

enum Kind {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// Removes the socket file.
struct SocketFile(PathBuf);

/// A listener serving on its thread. Keep it while the daemon runs: dropping it removes
/// a Unix socket's file (the thread keeps accepting until the process exits).
pub struct Serving {
    _file: Option<SocketFile>,
    pub local: ListenAddr,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Binds `addr`. Non-loopback TCP addresses are refused unless `allow_remote`.
pub fn bind(addr: &ListenAddr, allow_remote: bool) -> anyhow::Result<Listener> {
    match addr {
        ListenAddr::Unix(path) => {
            replace_stale(path)?;
            let l = UnixListener::bind(path)
                .with_context(|| format!("listening on unix:{}", path.display()))?;
            Ok(Listener {
                kind: Kind::Unix(l),
                file: Some(SocketFile(path.clone())),
                local: addr.clone(),
            })
        }
        ListenAddr::Tcp(a) => {
            let addrs: Vec<SocketAddr> = a
                .to_socket_addrs()
                .with_context(|| format!("tcp:{a}: not an address"))?
                .collect();
            if addrs.is_empty() {
                bail!("tcp:{a}: resolves to no address");
            }
            if !allow_remote && let Some(r) = addrs.iter().find(|s| !s.ip().is_loopback()) {
                bail!(
                    "tcp:{a} ({}) is not a loopback address: the protocol has no \
                     authentication, so anyone who can reach it can use it; add \
                     --allow-remote to listen there anyway",
                    r.ip()
                );
            }
            let l =
                TcpListener::bind(&addrs[..]).with_context(|| format!("listening on tcp:{a}"))?;
            let local = l.local_addr().context("the TCP listener's address")?;
            Ok(Listener {
                kind: Kind::Tcp(l),
                file: None,
                local: ListenAddr::Tcp(local.to_string()),
            })
        }
    }
}

/// A socket file left by a process that is gone is removed; one somebody listens on,
/// or any other kind of file, is an error.
fn replace_stale(path: &Path) -> anyhow::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(()); // nothing there
    };
    if !meta.file_type().is_socket() {
        bail!(
            "unix:{}: the path exists and is not a socket; not replacing it",
            path.display()
        );
    }
    match UnixStream::connect(path) {
        Ok(_) => bail!(
            "unix:{}: another process is listening on it (another primd?)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            log::info!("unix:{}: replacing a stale socket file", path.display());
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale socket {}", path.display()))
        }
        Err(e) => Err(e).with_context(|| format!("unix:{}: probing the socket", path.display())),
    }
}

impl Listener {
    /// Serves connections on a thread of its own, for the life of the process (or until
    /// the listener fails).
    pub fn serve(self, hub: Hub) -> std::io::Result<Serving> {
        let name = format!("primd-listen {}", self.local);
        let kind = self.kind;
        // Said before the thread starts: the listener is bound, connections wait in its
        // backlog, and the line comes before the ready line.
        crate::announce!("listening on {}", self.local);
        std::thread::Builder::new()
            .name("primd-listen".into())
            .spawn(move || {
                let mut n = 0u64;
                loop {
                    let conn: std::io::Result<(Box<dyn Conn>, String)> = match &kind {
                        Kind::Unix(l) => l.accept().map(|(s, _)| {
                            n += 1;
                            (Box::new(s) as Box<dyn Conn>, format!("unix#{n}"))
                        }),
                        Kind::Tcp(l) => l.accept().map(|(s, peer)| {
                            let _ = s.set_nodelay(true);
                            (Box::new(s) as Box<dyn Conn>, format!("tcp {peer}"))
                        }),
                    };
                    match conn {
                        Ok((c, peer)) => {
                            let hub = hub.clone();
                            let spawned = std::thread::Builder::new()
                                .name("primd-conn".into())
                                .spawn(move || connection(c, peer, hub));
                            if let Err(e) = spawned {
                                log::error!("{name}: no thread for a connection: {e}");
                            }
                        }
                        Err(e) => {
                            log::warn!("{name}: accept: {e}");
                            // E.g. out of file descriptors: do not spin.
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                    }
                }
            })?;
        Ok(Serving {
            _file: self.file,
            local: self.local,
        })
    }
}

/// A connected socket, Unix or TCP.
trait Conn: Read + Write + Send + 'static {
    fn clone_conn(&self) -> std::io::Result<Box<dyn Conn>>;
    fn shut(&self);
}

impl Conn for UnixStream {
    fn clone_conn(&self) -> std::io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn shut(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Conn for TcpStream {
    fn clone_conn(&self) -> std::io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn shut(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

/// One connection: this thread reads, a second one writes.
fn connection(conn: Box<dyn Conn>, peer: String, hub: Hub) {
    let (Ok(out), Ok(killer), Ok(closer)) =
        (conn.clone_conn(), conn.clone_conn(), conn.clone_conn())
    else {
        log::warn!("{peer}: could not duplicate the socket; closing it");
        return;
    };
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || killer.shut());
    let client = match hub.connect_with(&peer, Some(hook)) {
        Ok(c) => c,
        Err(e) => {
            let mut out = out;
            let mut line = error_line(&Refusal::new(e.code(), e.to_string()), None);
            line.push(b'\n');
            let _ = out.write_all(&line);
            log::warn!("{peer}: refused: {e}");
            return;
        }
    };
    log::info!("{peer}: connected (client {})", client.id());
    let (reply_tx, reply_rx) = bounded::<Vec<u8>>(REPLY_QUEUE);
    let results = client.results().clone();
    let hello = hello(&hub);
    let writer = {
        let peer = peer.clone();
        std::thread::Builder::new()
            .name("primd-conn-w".into())
            .spawn(move || write_loop(out, hello, results, reply_rx, &peer))
    };
    let Ok(writer) = writer else {
        log::error!("{peer}: no writer thread; closing");
        return;
    };
    let reason = read_loop(conn, client, &reply_tx, &peer);
    drop(reply_tx);
    log::info!("{peer}: {reason}");
    // The writer writes what is still due, then ends when the hub lets the client go.
    let _ = writer.join();
    closer.shut();
}

/// The greeting line.
fn hello(hub: &Hub) -> Vec<u8> {
    let index = hub.index();
    let mut v = typed(
        "hello",
        json!({
            "protocol": PROTOCOL_VERSION,
            "primd": env!("CARGO_PKG_VERSION"),
            "passages": index.len(),
            "index": index.path().display().to_string(),
            "max_frame": MAX_FRAME_BYTES,
        }),
    );
    v.push(b'\n');
    v
}

/// `fields` (an object) as one JSON object with `"type": kind` first, as results have
/// it (serde_json's maps sort their keys).
fn typed(kind: &str, fields: Value) -> Vec<u8> {
    let mut out = format!("{{\"type\":{}", json!(kind)).into_bytes();
    let rest = serde_json::to_vec(&fields).unwrap_or_default();
    if rest.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&rest[1..]);
    } else {
        out.push(b'}');
    }
    out
}

fn write_loop(
    mut out: Box<dyn Conn>,
    hello: Vec<u8>,
    results: Receiver<Delivery>,
    replies: Receiver<Vec<u8>>,
    peer: &str,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    if out.write_all(&hello).is_err() {
        out.shut();
        return;
    }
    let mut replies = replies;
    loop {
        select! {
            recv(results) -> d => match d {
                Ok(d) => {
                    buf.clear();
                    if let Err(e) = d.encode(&mut buf) {
                        log::error!("{peer}: result not written: {e:#}");
                        continue;
                    }
                    if out.write_all(&buf).is_err() {
                        break;
                    }
                }
                // The hub let the client go, and everything due was written.
                Err(_) => break,
            },
            recv(replies) -> r => match r {
                Ok(line) => {
                    if out.write_all(&line).is_err() {
                        break;
                    }
                }
                Err(_) => replies = never(),
            },
        }
    }
    // A failed write (the client went away, or the hub shut an overflowing client
    // down): make the reader stop too.
    out.shut();
}

/// Reads frames until the client closes; returns why it ended.
fn read_loop(
    conn: Box<dyn Conn>,
    mut client: Client,
    replies: &Sender<Vec<u8>>,
    peer: &str,
) -> String {
    let mut lines =
        LineReader::with_limit(BufReader::with_capacity(16 * 1024, conn), MAX_FRAME_BYTES);
    lines.set_mode(Mode::Lines);
    let mut sessions: HashMap<String, Session> = HashMap::new();
    let reply = |v: Vec<u8>| -> bool {
        match replies.try_send(v) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                log::warn!("{peer}: {REPLY_QUEUE} replies unread: disconnecting");
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    };
    loop {
        if client.overflowed() {
            return "disconnected: it did not read its results".into();
        }
        let (line_no, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => return "closed the connection".into(),
            Err(e) => return format!("connection failed: {e}"),
        };
        let Some(request) = protocol::parse_line(&line) else {
            continue;
        };
        let answer = match request {
            Err(r) => Some(error_line(&r, Some(line_no))),
            Ok(Request::Transcript {
                session,
                turn,
                what,
                context,
                context_tokens,
            }) => transcript(
                &client,
                &mut sessions,
                session,
                turn,
                what,
                TurnOptions {
                    context,
                    context_tokens,
                },
                line_no,
            ),
            Ok(Request::Command { id, cmd }) => {
                Some(command(&mut client, &mut sessions, id, cmd, line_no))
            }
        };
        if let Some(mut a) = answer {
            a.push(b'\n');
            if !reply(a) {
                return "disconnected: it did not read its replies".into();
            }
        }
    }
}

fn transcript(
    client: &Client,
    sessions: &mut HashMap<String, Session>,
    name: String,
    turn: u64,
    what: What,
    options: TurnOptions,
    line_no: u64,
) -> Option<Vec<u8>> {
    let hub_error = |e: HubError| {
        let r = Refusal {
            session: Some(name.clone()),
            turn: Some(turn),
            ..Refusal::new(e.code(), e.to_string())
        };
        Some(error_line(&r, Some(line_no)))
    };
    if !sessions.contains_key(&name) {
        match client.open_session(&name) {
            Ok(s) => {
                sessions.insert(name.clone(), s);
            }
            Err(e) => return hub_error(e),
        }
    }
    let s = sessions.get_mut(&name)?;
    if !options.context || options.context_tokens.is_some() {
        s.set_options(options);
    }
    let r = match &what {
        What::Partial(t) => s.partial(turn, t),
        What::Final(t) => s.final_(turn, t),
        What::EndOfSpeech => s.end_of_speech(turn),
    };
    match r {
        Ok(Taken::Yes | Taken::StaleTurn) => None,
        Err(e) => hub_error(e),
    }
}

fn command(
    client: &mut Client,
    sessions: &mut HashMap<String, Session>,
    id: Option<Value>,
    cmd: Command,
    line_no: u64,
) -> Vec<u8> {
    let name = cmd.name();
    let ok = |fields: Value| {
        let mut v = json!({"cmd": name, "ok": true});
        if let Some(id) = &id {
            v["id"] = id.clone();
        }
        if let (Value::Object(v), Value::Object(f)) = (&mut v, fields) {
            v.extend(f);
        }
        typed("reply", v)
    };
    let failed = |code: &'static str, message: String| {
        let r = Refusal {
            cmd: Some(name.to_string()),
            id: id.clone().map(Box::new),
            ..Refusal::new(code, message)
        };
        error_line(&r, Some(line_no))
    };
    match cmd {
        Command::Ping => ok(json!({})),
        Command::Subscribe {
            session,
            speculative,
        } => match client.subscribe(&session, speculative) {
            Ok(()) => ok(json!({"session": session, "speculative": speculative})),
            Err(e) => failed(e.code(), e.to_string()),
        },
        Command::Unsubscribe { session } => match client.unsubscribe(&session) {
            Ok(()) => ok(json!({"session": session})),
            Err(e) => failed(e.code(), e.to_string()),
        },
        Command::Close { session } => match sessions.remove(&session) {
            Some(s) => {
                drop(s);
                ok(json!({"session": session}))
            }
            None => failed(
                "unknown_session",
                format!("{session:?} is not a session of this connection"),
            ),
        },
        Command::Reset { session } => {
            let r = match sessions.get(&session) {
                Some(s) => s.reset(),
                None if session == crate::hub::STT_SESSION => client.hub().reset_stt(),
                None => {
                    return failed(
                        "unknown_session",
                        format!("{session:?} is not a session of this connection (nor \"stt\")"),
                    );
                }
            };
            match r {
                Ok(()) => ok(json!({"session": session})),
                Err(e) => failed(e.code(), e.to_string()),
            }
        }
        Command::Topic { session, topic } => {
            // A passage's topic is its title (its text, cut, when it has none): looked
            // up here, on the connection's thread, not the retriever's.
            let text = match topic {
                TopicSource::Text(t) => t,
                TopicSource::Clear => String::new(),
                TopicSource::Passage(id) => {
                    let index = client.hub().index();
                    let found = (0..index.len())
                        .filter_map(|i| index.passage(i).ok())
                        .find(|p| p.id == id)
                        .map(|p| {
                            let t = if p.title.trim().is_empty() {
                                p.text
                            } else {
                                p.title
                            };
                            t.trim().to_string()
                        });
                    match found {
                        Some(t) => t,
                        None => {
                            let shown: String = id.chars().take(64).collect();
                            return failed(
                                "unknown_passage",
                                format!("no passage {shown:?} in the index"),
                            );
                        }
                    }
                }
            };
            let r = match sessions.get(&session) {
                Some(s) => s.set_topic(&text),
                None if session == crate::hub::STT_SESSION => client.hub().set_stt_topic(&text),
                None => {
                    return failed(
                        "unknown_session",
                        format!("{session:?} is not a session of this connection (nor \"stt\")"),
                    );
                }
            };
            let shown = crate::conversation::cut_topic(&text);
            match r {
                Ok(()) if shown.is_empty() => ok(json!({"session": session, "topic": null})),
                Ok(()) => ok(json!({"session": session, "topic": shown})),
                Err(e) => failed(e.code(), e.to_string()),
            }
        }
        Command::Reload => match client.hub().reload() {
            Ok(ix) => ok(json!({
                "staged": true,
                "passages": ix.len(),
                "index": ix.path().display().to_string(),
            })),
            Err(e) => failed("reload_failed", format!("{e}; still serving the old index")),
        },
        Command::Stats => ok(json!({"stats": client.hub().stats()})),
    }
}

fn error_line(r: &Refusal, line: Option<u64>) -> Vec<u8> {
    let mut v = json!({"code": r.code, "message": r.message});
    if let Some(cmd) = &r.cmd {
        v["cmd"] = json!(cmd);
    }
    if let Some(id) = &r.id {
        v["id"] = (**id).clone();
    }
    if let Some(s) = &r.session {
        v["session"] = json!(s);
    }
    if let Some(t) = r.turn {
        v["turn"] = json!(t);
    }
    if let Some(n) = line {
        v["line"] = json!(n);
    }
    typed("error", v)
}

/// Serves every listener; keep the guards while the daemon runs.
pub fn serve_all(listeners: Vec<Listener>, hub: &Hub) -> anyhow::Result<Vec<Serving>> {
    listeners
        .into_iter()
        .map(|l| l.serve(hub.clone()).context("starting a listener thread"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_start_with_their_type() {
        assert_eq!(typed("reply", json!({})), br#"{"type":"reply"}"#);
        let v = typed("error", json!({"code": "bad_json", "line": 3}));
        assert!(
            v.starts_with(br#"{"type":"error","#),
            "{}",
            String::from_utf8_lossy(&v)
        );
        let back: Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(
            back,
            json!({"type": "error", "code": "bad_json", "line": 3})
        );
    }

    #[test]
    fn addresses_parse_or_say_what_is_expected() {
        assert_eq!(
            "unix:/run/p.sock".parse(),
            Ok(ListenAddr::Unix("/run/p.sock".into()))
        );
        assert_eq!(
            "tcp:127.0.0.1:7700".parse(),
            Ok(ListenAddr::Tcp("127.0.0.1:7700".into()))
        );
        assert!(
            "tcp:7700"
                .parse::<ListenAddr>()
                .unwrap_err()
                .contains("HOST:PORT")
        );
        assert!("unix:".parse::<ListenAddr>().is_err());
        assert!(
            "/run/p.sock"
                .parse::<ListenAddr>()
                .unwrap_err()
                .contains("unix:PATH")
        );
        let e = bind(&"tcp:0.0.0.0:0".parse().unwrap(), false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--allow-remote"), "{e}");
        let l = bind(&"tcp:127.0.0.1:0".parse().unwrap(), false).unwrap();
        assert!(
            matches!(&l.local, ListenAddr::Tcp(a) if !a.ends_with(":0")),
            "{}",
            l.local
        );
    }

    #[test]
    fn a_socket_somebody_listens_on_or_another_file_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        let addr = ListenAddr::Unix(p.clone());
        let held = bind(&addr, false).unwrap();
        let e = bind(&addr, false).err().unwrap();
        assert!(
            e.to_string().contains("another process is listening"),
            "{e}"
        );
        drop(held);
        assert!(!p.exists(), "removed with its listener");
        std::fs::write(&p, b"a file").unwrap();
        let e = bind(&addr, false).err().unwrap();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"a file");
    }
}

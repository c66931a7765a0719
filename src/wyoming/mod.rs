//! Wyoming: Home Assistant's voice protocol, as an input of `primd run`.
//!
//! Home Assistant's local voice pipeline talks to its speech services over Wyoming
//! (framed JSON events with binary payloads; the framing is parsed by
//! [`primd_input::wyoming`], fuzzed with the other untrusted inputs). primd takes part in
//! two ways, each connection being one session `wyoming-N` of the retriever:
//!
//! - **Server** (`--wyoming tcp:127.0.0.1:10300`, [`server`]): a Wyoming peer sends primd
//!   transcript events (`transcript-start`, `transcript-chunk` deltas, `transcript`,
//!   `transcript-stop`); `describe` is answered with an `info` that presents primd as
//!   what it is to Home Assistant: a `handle` service (how HA plugs in conversation
//!   agents: it sends the final `transcript` and speaks the `handled` text back). primd
//!   answers a `transcript` with one sentence, its context's best (`handled`), or
//!   `not-handled` when the evidence is low.
//! - **Proxy** (`--wyoming-proxy tcp://ASR_HOST:PORT` with `--wyoming`, [`proxy`]): HA
//!   connects to primd as if it were its speech-to-text service; primd connects to the
//!   real one and relays every frame both ways byte for byte, and retrieves from the
//!   transcripts the service sends HA. The passages go to whoever subscribed to the
//!   session on the socket API, and to stdout, before HA's conversation agent starts.
//!
//! Why threads and blocking sockets: a Home Assistant install opens one connection per
//! voice command and a handful at most at once ([`MAX_CONNECTIONS`]); a thread per side
//! keeps each relay a plain read–forward loop whose only shared resource is the
//! session handle, and no connection can stall another or the retriever (transcripts
//! reach the retriever through a bounded queue that never blocks the relay).

mod backend;
mod info;
pub mod proxy;
pub mod server;

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use anyhow::Context;

pub use backend::{Backend, FinalResult, HubBackend, Results, Session};

/// Connections served at once; more are closed at accept, with a warning.
pub const MAX_CONNECTIONS: usize = 16;

/// `--wyoming` / `--wyoming-proxy` addresses: `tcp:HOST:PORT` or `tcp://HOST:PORT`
/// (the latter is how Wyoming programs write theirs).
pub fn parse_tcp(spec: &str) -> Result<String, String> {
    let rest = spec
        .strip_prefix("tcp://")
        .or_else(|| spec.strip_prefix("tcp:"))
        .ok_or_else(|| format!("{spec:?}: expected tcp:HOST:PORT or tcp://HOST:PORT"))?;
    let rest = rest.trim_end_matches('/');
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(rest.to_string())
        }
        _ => Err(format!(
            "{spec:?}: expected tcp:HOST:PORT or tcp://HOST:PORT"
        )),
    }
}

/// The address to listen on: every address it resolves to must be loopback unless
/// `allow_remote` (Wyoming has no authentication).
pub fn listen_addr(spec: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let hostport = parse_tcp(spec).map_err(anyhow::Error::msg)?;
    let addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .with_context(|| format!("resolving --wyoming {spec:?}"))?
        .collect();
    let first = *addrs
        .first()
        .with_context(|| format!("--wyoming {spec:?} resolves to no address"))?;
    if !allow_remote && addrs.iter().any(|a| !a.ip().is_loopback()) {
        anyhow::bail!(
            "--wyoming {spec:?} is not a loopback address: Wyoming has no authentication; \
             pass --allow-remote to serve other machines (e.g. Home Assistant on another host)"
        );
    }
    Ok(first)
}

/// Binds the `--wyoming` address (checked by [`listen_addr`]): done before the model
/// loads, so that an address in use or not allowed fails the start at once.
pub fn bind(spec: &str, allow_remote: bool) -> anyhow::Result<TcpListener> {
    let addr = listen_addr(spec, allow_remote)?;
    TcpListener::bind(addr).with_context(|| format!("listening on {addr} (--wyoming)"))
}

/// What `--wyoming` serves.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--wyoming-proxy`: the speech service to relay to (`HOST:PORT`).
    pub upstream: Option<String>,
    /// For the `info` reply: the index file and its passage count.
    pub index_name: String,
    pub passages: usize,
    pub retriever: String,
}

/// A running listener (its thread runs until the process exits).
pub struct Listener {
    pub addr: SocketAddr,
}

/// Serves `listener` ([`bind`]) from a thread of its own: one thread per connection
/// (three for a proxied one), each connection a session `wyoming-N`.
pub fn start(
    listener: TcpListener,
    opts: Options,
    backend: Arc<dyn Backend>,
) -> anyhow::Result<Listener> {
    let addr = listener.local_addr()?;
    match &opts.upstream {
        Some(up) => crate::announce!("wyoming: listening on {addr}, proxying to {up}"),
        None => crate::announce!("wyoming: listening on {addr}"),
    }
    let opts = Arc::new(opts);
    std::thread::Builder::new()
        .name("primd-wyoming".into())
        .spawn(move || accept(listener, &opts, &backend))?;
    Ok(Listener { addr })
}

fn accept(listener: TcpListener, opts: &Arc<Options>, backend: &Arc<dyn Backend>) {
    let counter = AtomicU64::new(0);
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                log::warn!("wyoming: accept: {e}");
                // EMFILE and the like: do not spin.
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string());
        if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            log::warn!(
                "wyoming: connection from {peer} refused: {MAX_CONNECTIONS} connections open"
            );
            continue;
        }
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("wyoming-{n}");
        open.fetch_add(1, Ordering::Relaxed);
        let guard = OpenGuard(open.clone());
        let (opts, backend) = (opts.clone(), backend.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("primd-{name}"))
            .spawn(move || {
                let _guard = guard;
                log::info!("{name}: connection from {peer}");
                connection(stream, &name, &opts, &backend);
            });
        if let Err(e) = spawned {
            log::error!("wyoming: no thread for a connection: {e}");
        }
    }
}

fn connection(stream: TcpStream, name: &str, opts: &Options, backend: &Arc<dyn Backend>) {
    let _ = stream.set_nodelay(true);
    match &opts.upstream {
        Some(up) => proxy::run(stream, name, up, backend.as_ref()),
        None => server::run(stream, name, opts, backend.as_ref()),
    }
}

/// Counts a connection as open until dropped.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_both_spellings_and_remote_ones_need_the_flag() {
        assert_eq!(parse_tcp("tcp:127.0.0.1:10300").unwrap(), "127.0.0.1:10300");
        assert_eq!(parse_tcp("tcp://asr.lan:10300").unwrap(), "asr.lan:10300");
        assert_eq!(parse_tcp("tcp://[::1]:10300/").unwrap(), "[::1]:10300");
        for bad in [
            "127.0.0.1:10300",
            "tcp:host",
            "tcp://:10300",
            "unix:/x",
            "tcp:h:99999",
        ] {
            assert!(parse_tcp(bad).is_err(), "{bad}");
        }
        assert!(
            listen_addr("tcp:127.0.0.1:0", false)
                .unwrap()
                .ip()
                .is_loopback()
        );
        assert!(listen_addr("tcp:[::1]:0", false).is_ok());
        let e = listen_addr("tcp:0.0.0.0:10300", false).unwrap_err();
        assert!(e.to_string().contains("--allow-remote"), "{e}");
        assert!(listen_addr("tcp:0.0.0.0:10300", true).is_ok());
    }
}

#[cfg(test)]
mod relay_tests;

//! systemd service notifications (`Type=notify`): readiness, watchdog and status, over
//! the `NOTIFY_SOCKET` datagram protocol (the `sd-notify` crate: pure Rust, no
//! libsystemd on the board).
//!
//! Why the watchdog is fed from the retriever's loop and nowhere else: the failure worth
//! restarting for is a retriever that stopped turning (a hung embed, a deadlock), while
//! the reader and writer threads may look perfectly alive. So the loop calls
//! [`Notifier::alive`] on every turn, and when idle it wakes at least every
//! [`Notifier::wake_interval`] (a quarter of `WATCHDOG_USEC`, well inside the half that
//! systemd recommends) just to do so. A loop that stops turning stops the pings, and
//! systemd kills and restarts the service after `WatchdogSec`.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) every call is a cheap no-op and the loop
//! never wakes for nothing. Sending allocates (the crate formats a message and opens a
//! socket), so it is rate-limited to one datagram per interval, never per partial.

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// Status updates at most this often when there is no watchdog.
const STATUS_EVERY: Duration = Duration::from_secs(5);

pub struct Notifier {
    /// `NOTIFY_SOCKET` is set.
    active: bool,
    /// `WATCHDOG_USEC` (for this process).
    watchdog: Option<Duration>,
    last: Instant,
    /// Utterances last reported in `STATUS=`.
    reported: Option<u64>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` / `WATCHDOG_USEC` / `WATCHDOG_PID` from the environment.
    pub fn from_env() -> Self {
        let active = std::env::var_os("NOTIFY_SOCKET").is_some();
        let watchdog = if active {
            sd_notify::watchdog_enabled().filter(|d| !d.is_zero())
        } else {
            None
        };
        Notifier {
            active,
            watchdog,
            last: Instant::now(),
            reported: None,
        }
    }

    /// The longest the retriever loop may block before calling [`alive`](Self::alive)
    /// again (`None`: no limit).
    pub fn wake_interval(&self) -> Option<Duration> {
        match (self.active, self.watchdog) {
            (_, Some(w)) => Some(w / 4),
            (true, None) => Some(STATUS_EVERY),
            (false, None) => None,
        }
    }

    /// `READY=1`: model, index and input are up.
    pub fn ready(&mut self, status: &str) {
        if let Some(w) = self.watchdog {
            log::info!(
                "systemd watchdog: {w:?}, fed every {:?} from the retriever loop",
                w / 4
            );
        }
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
        self.last = Instant::now();
    }

    /// A free-form `STATUS=` line (e.g. after an index reload).
    pub fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
    }

    /// Called by the retriever loop on every turn: pings the watchdog (and updates the
    /// status with `served` utterances) when an interval has passed. One clock read
    /// otherwise.
    #[inline]
    pub fn alive(&mut self, served: u64) {
        let Some(every) = self.wake_interval() else {
            return;
        };
        if self.last.elapsed() < every {
            return;
        }
        self.ping(served);
    }

    #[cold]
    fn ping(&mut self, served: u64) {
        self.last = Instant::now();
        let status = (self.reported != Some(served)).then(|| {
            self.reported = Some(served);
            format!("{served} utterances answered")
        });
        let mut states = heapless::Vec::<NotifyState, 2>::new();
        if self.watchdog.is_some() {
            let _ = states.push(NotifyState::Watchdog);
        }
        if let Some(s) = &status {
            let _ = states.push(NotifyState::Status(s));
        }
        if !states.is_empty() {
            self.send(&states);
        }
    }

    fn send(&self, states: &[NotifyState]) {
        if !self.active {
            return;
        }
        if let Err(e) = sd_notify::notify(states) {
            log::warn!("systemd notify: {e}");
        }
    }
}

/// Test hook, debug builds only: while the file named by `PRIMD_TEST_STALL_FILE` exists,
/// the retriever loop calling this stands still (a stand-in for a hung loop, so a test
/// can watch the watchdog pings stop). Compiled out of release builds.
#[inline]
pub fn test_stall() {
    #[cfg(debug_assertions)]
    {
        use std::sync::OnceLock;
        static STALL: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
        let Some(path) = STALL
            .get_or_init(|| std::env::var_os("PRIMD_TEST_STALL_FILE").map(Into::into))
            .as_ref()
        else {
            return;
        };
        if path.exists() {
            log::warn!("test hook: retriever loop stalled while {path:?} exists");
            while path.exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notifier(active: bool, watchdog: Option<Duration>) -> Notifier {
        Notifier {
            active,
            watchdog,
            last: Instant::now(),
            reported: None,
        }
    }

    #[test]
    fn wake_interval_is_a_quarter_of_the_watchdog() {
        assert_eq!(notifier(false, None).wake_interval(), None);
        assert_eq!(notifier(true, None).wake_interval(), Some(STATUS_EVERY));
        assert_eq!(
            notifier(true, Some(Duration::from_secs(2))).wake_interval(),
            Some(Duration::from_millis(500))
        );
    }
}

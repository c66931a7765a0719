//! A serial line as an endless byte source that survives the cable being pulled.
//!
//! Kiosks and robots often run speech-to-text on a separate board wired to a UART or a
//! USB serial adapter. Such a line disappears (`/dev/ttyUSB0` vanishes when the adapter
//! is unplugged, a pseudo-terminal hangs up when its writer dies) and comes back under
//! the same path. [`SerialReader`] hides that from the daemon: a read blocks until bytes
//! arrive, reopening the device with backoff when it goes away, and never reports end
//! of input. After a disconnect it yields one `\n`, so that a line cut in half by the
//! hang-up is terminated (and rejected or ended) instead of being glued to the first
//! line of the next connection.

use std::io::{self, Read};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Default line speed when the spec names none.
pub const DEFAULT_BAUD: u32 = 115_200;

/// How long one read waits before checking the line again (bounded so that a dead
/// device is noticed even when poll does not report it).
const READ_TIMEOUT: Duration = Duration::from_millis(500);
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(5);
/// While a device stays away, remind the log this often (not at every retry: a board
/// can run for months with its STT unplugged).
const REMIND_EVERY: Duration = Duration::from_secs(60);

/// `serial:/dev/ttyUSB0` or `serial:/dev/ttyUSB0@115200`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SerialSpec {
    pub path: PathBuf,
    pub baud: u32,
}

impl FromStr for SerialSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let rest = s
            .strip_prefix("serial:")
            .ok_or_else(|| format!("{s:?}: a serial input is written serial:PATH[@BAUD]"))?;
        let (path, baud) = match rest.rsplit_once('@') {
            Some((p, b)) => {
                let baud =
                    b.parse::<u32>().ok().filter(|&b| b > 0).ok_or_else(|| {
                        format!("{s:?}: baud rate {b:?} is not a positive number")
                    })?;
                (p, baud)
            }
            None => (rest, DEFAULT_BAUD),
        };
        if path.is_empty() {
            return Err(format!("{s:?}: no device path after serial:"));
        }
        Ok(SerialSpec {
            path: path.into(),
            baud,
        })
    }
}

/// Reads a serial device, reconnecting forever; see the module docs.
pub struct SerialReader {
    spec: SerialSpec,
    port: Option<Box<dyn serialport::SerialPort>>,
    /// A disconnect happened and its `\n` has not been delivered yet.
    owe_newline: bool,
    connections: u64,
}

impl SerialReader {
    /// Opens the device now if it is there; if not, the first read waits for it.
    pub fn new(spec: SerialSpec) -> Self {
        let mut r = SerialReader {
            spec,
            port: None,
            owe_newline: false,
            connections: 0,
        };
        if let Err(e) = r.try_open() {
            log::warn!(
                "serial {}: {e}; waiting for the device",
                r.spec.path.display()
            );
        }
        r
    }

    /// How many times the device has been opened (1 after the first connection).
    pub fn connections(&self) -> u64 {
        self.connections
    }

    fn try_open(&mut self) -> Result<(), serialport::Error> {
        let path = self.spec.path.to_string_lossy();
        let port = serialport::new(path.as_ref(), self.spec.baud)
            .timeout(READ_TIMEOUT)
            .open()?;
        self.connections += 1;
        log::info!(
            "serial {}: connected at {} baud{}",
            self.spec.path.display(),
            self.spec.baud,
            if self.connections > 1 {
                " (reconnected)"
            } else {
                ""
            }
        );
        self.port = Some(port);
        Ok(())
    }

    /// Blocks until the device opens, retrying with exponential backoff.
    fn reconnect(&mut self) {
        let down_since = Instant::now();
        let mut last_reminder = down_since;
        let mut wait = FIRST_RETRY;
        loop {
            match self.try_open() {
                Ok(()) => return,
                Err(e) => {
                    if last_reminder.elapsed() >= REMIND_EVERY {
                        last_reminder = Instant::now();
                        log::warn!(
                            "serial {}: still unavailable after {} s ({e}); retrying",
                            self.spec.path.display(),
                            down_since.elapsed().as_secs()
                        );
                    } else {
                        log::debug!("serial {}: {e}", self.spec.path.display());
                    }
                }
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(MAX_RETRY);
        }
    }

    fn lost(&mut self, why: &str) {
        log::warn!("serial {}: {why}; reconnecting", self.spec.path.display());
        self.port = None;
        self.owe_newline = true;
    }
}

impl Read for SerialReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.owe_newline {
                self.owe_newline = false;
                buf[0] = b'\n';
                return Ok(1);
            }
            let Some(port) = self.port.as_mut() else {
                self.reconnect();
                continue;
            };
            match port.read(buf) {
                Ok(0) => self.lost("hung up"),
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => self.lost(&e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_path_and_an_optional_baud_rate() {
        let s: SerialSpec = "serial:/dev/ttyUSB0@9600".parse().unwrap();
        assert_eq!((s.path.to_str().unwrap(), s.baud), ("/dev/ttyUSB0", 9600));
        let s: SerialSpec = "serial:/dev/ttyAMA0".parse().unwrap();
        assert_eq!(
            (s.path.to_str().unwrap(), s.baud),
            ("/dev/ttyAMA0", DEFAULT_BAUD)
        );
        for bad in [
            "/dev/ttyUSB0",
            "serial:",
            "serial:/dev/x@fast",
            "serial:/dev/x@0",
        ] {
            let e = bad.parse::<SerialSpec>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}

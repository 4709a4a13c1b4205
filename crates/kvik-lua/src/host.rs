//! The boundary between the scripting runtime and the server: [`Host`].
//!
//! The runtime never touches the dataset. Every `redis.call` / `redis.pcall` becomes one
//! [`Host::call`], and the server answers it the way it answers a client: by running the
//! command (with its script-specific checks) and handing back the reply as a [`Frame`].

use kvik_resp::Frame;

/// Redis's `redis.log` levels (`redis.LOG_DEBUG` ... `redis.LOG_WARNING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `LL_DEBUG` (0).
    Debug,
    /// `LL_VERBOSE` (1).
    Verbose,
    /// `LL_NOTICE` (2).
    Notice,
    /// `LL_WARNING` (3).
    Warning,
}

impl LogLevel {
    /// The level for Redis's numeric constant, if it is one.
    pub fn from_number(n: i64) -> Option<LogLevel> {
        Some(match n {
            0 => LogLevel::Debug,
            1 => LogLevel::Verbose,
            2 => LogLevel::Notice,
            3 => LogLevel::Warning,
            _ => return None,
        })
    }
}

/// What one command run for a script produced.
#[derive(Clone, Debug, PartialEq)]
pub struct HostReply {
    /// The command's reply, parsed as the script's protocol spells it (an error reply is
    /// [`Frame::Error`]: `redis.call` raises it, `redis.pcall` returns it).
    pub frame: Frame,
    /// Whether the command changed the dataset. Once a script has written, SCRIPT KILL must
    /// refuse to stop it (the dataset would hold half a script).
    pub wrote: bool,
}

impl From<Frame> for HostReply {
    fn from(frame: Frame) -> HostReply {
        HostReply {
            frame,
            wrote: false,
        }
    }
}

/// The server side of a running script.
pub trait Host {
    /// Runs one command on behalf of the script. `args[0]` is the command name as the script
    /// wrote it; `resp` is 2 or 3 (`redis.setresp`), the protocol the reply must be parsed in.
    /// Script-specific refusals are the host's job, with Redis's texts from
    /// [`crate::errors`] (unknown command, arity, `noscript` commands, writes from read-only
    /// scripts, OOM, cross-slot keys in cluster mode).
    fn call(&mut self, args: &[&[u8]], resp: u8) -> HostReply;

    /// `redis.log(level, ...)`: the joined message. Dropped unless the host logs it.
    fn log(&mut self, _level: LogLevel, _message: &[u8]) {}

    /// `redis.acl_check_cmd(...)`: whether the calling user may run `args`. `Err` carries an
    /// error text (Redis: `ERR Invalid command passed to redis.acl_check_cmd()`).
    fn acl_check_cmd(&mut self, _args: &[&[u8]]) -> Result<bool, String> {
        Ok(true)
    }
}

//! The boundary between the scripting runtime and the server: [`Host`].
//!
//! The runtime never touches the dataset. Every `redis.call` / `redis.pcall` becomes one
//! [`Host::call`], and the server answers it the way it answers a client: by running the
//! command (with its script-specific checks) and handing back the reply as a [`Frame`].
//! [`RunContext`] groups what one run needs from the server: the host, the control other
//! threads stop it through, the client's protocol and the output buffer.

use std::sync::Arc;

use kvik_resp::{Frame, Proto};

use crate::control::ScriptControl;

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
    /// wrote it (the arguments are the host's to keep: a server makes its command vector of
    /// them without copying); `resp` is 2 or 3 (`redis.setresp`), the protocol the reply must
    /// be parsed in.
    /// Script-specific refusals are the host's job, with Redis's texts from
    /// [`crate::errors`] (unknown command, arity, `noscript` commands, writes from read-only
    /// scripts, OOM, cross-slot keys in cluster mode).
    fn call(&mut self, args: Vec<Vec<u8>>, resp: u8) -> HostReply;

    /// `redis.log(level, ...)`: the joined message. Dropped unless the host logs it.
    fn log(&mut self, _level: LogLevel, _message: &[u8]) {}

    /// `redis.acl_check_cmd(...)`: whether the calling user may run `args`. `Err` carries an
    /// error text (Redis: `ERR Invalid command passed to redis.acl_check_cmd()`).
    fn acl_check_cmd(&mut self, _args: &[&[u8]]) -> Result<bool, String> {
        Ok(true)
    }
}

/// What one run of a script or function needs from its caller.
pub struct RunContext<'a> {
    /// Runs the script's commands.
    pub host: &'a mut dyn Host,
    /// Busy state and kill flag, shared with the server's other threads.
    pub control: &'a Arc<ScriptControl>,
    /// The calling client's protocol: the script's result is written in it.
    pub proto: Proto,
    /// The caller's reply buffer; the result (or error) is appended.
    pub out: &'a mut Vec<u8>,
}

impl std::fmt::Debug for RunContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("proto", &self.proto)
            .finish()
    }
}

impl<'a> RunContext<'a> {
    /// A context writing into `out` for a client speaking `proto`.
    pub fn new(
        host: &'a mut dyn Host,
        control: &'a Arc<ScriptControl>,
        proto: Proto,
        out: &'a mut Vec<u8>,
    ) -> RunContext<'a> {
        RunContext {
            host,
            control,
            proto,
            out,
        }
    }
}

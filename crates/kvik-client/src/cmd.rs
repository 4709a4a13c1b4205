//! [`Cmd`] (one command being built), [`Pipeline`] (several sent as one unit) and [`ToArg`].

/// Anything that can be a command argument: byte strings, text and numbers.
pub trait ToArg {
    /// Appends this argument's bytes.
    fn write_arg(&self, out: &mut Vec<u8>);
}

impl ToArg for [u8] {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}
impl ToArg for str {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
}
impl ToArg for String {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
}
impl ToArg for Vec<u8> {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}
impl<const N: usize> ToArg for [u8; N] {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}
impl<T: ToArg + ?Sized> ToArg for &T {
    fn write_arg(&self, out: &mut Vec<u8>) {
        (**self).write_arg(out)
    }
}
macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn write_arg(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(self.to_string().as_bytes());
            }
        }
    )*};
}
int_arg!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);
impl ToArg for f64 {
    fn write_arg(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(kvik_resp::format_g17(*self).as_bytes());
    }
}

/// One command: its name and arguments, kept as separate byte strings so routing can read the
/// keys. Build with [`cmd`] and [`Cmd::arg`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    args: Vec<Vec<u8>>,
    idempotent: bool,
}

/// Starts a command: `cmd("SET").arg("k").arg("v")`.
pub fn cmd(name: &str) -> Cmd {
    Cmd::new(name)
}

impl Cmd {
    /// A command with only its name.
    pub fn new(name: &str) -> Cmd {
        let idempotent = is_read_only(name.as_bytes());
        Cmd {
            args: vec![name.as_bytes().to_vec()],
            idempotent,
        }
    }

    /// A command from already split arguments (`args[0]` is the name).
    pub fn from_args<I, A>(args: I) -> Cmd
    where
        I: IntoIterator<Item = A>,
        A: ToArg,
    {
        let args: Vec<Vec<u8>> = args
            .into_iter()
            .map(|a| {
                let mut v = Vec::new();
                a.write_arg(&mut v);
                v
            })
            .collect();
        let idempotent = args.first().is_some_and(|n| is_read_only(n));
        Cmd { args, idempotent }
    }

    /// Appends one argument.
    pub fn arg<A: ToArg>(mut self, a: A) -> Cmd {
        let mut v = Vec::new();
        a.write_arg(&mut v);
        self.args.push(v);
        self
    }

    /// Appends one argument in place.
    pub fn push_arg<A: ToArg>(&mut self, a: A) {
        let mut v = Vec::new();
        a.write_arg(&mut v);
        self.args.push(v);
    }

    /// Marks the command safe to replay after a connection error (when
    /// [`ConnectOptions::retries`](crate::ConnectOptions::retries) is above 0). Read-only
    /// commands are marked already.
    pub fn idempotent(mut self) -> Cmd {
        self.idempotent = true;
        self
    }

    /// Whether the command may be replayed after a connection error.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The arguments, name first.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// The command name, upper-cased.
    pub fn name_upper(&self) -> String {
        String::from_utf8_lossy(&self.args[0]).to_ascii_uppercase()
    }

    /// Appends the RESP request bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let refs: Vec<&[u8]> = self.args.iter().map(Vec::as_slice).collect();
        kvik_resp::encode::command(out, &refs);
    }

    /// Why this command may not run on a shared connection, if it may not.
    pub(crate) fn shared_refusal(&self) -> Option<String> {
        let name = self.name_upper();
        let blocking = matches!(
            name.as_str(),
            "BLPOP"
                | "BRPOP"
                | "BRPOPLPUSH"
                | "BLMOVE"
                | "BLMPOP"
                | "BZPOPMIN"
                | "BZPOPMAX"
                | "BZMPOP"
                | "WAIT"
                | "WAITAOF"
        ) || (matches!(name.as_str(), "XREAD" | "XREADGROUP")
            && self.args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK")));
        if blocking {
            return Some(format!(
                "{name} blocks the connection and would stall every other caller; \
                 open a dedicated connection with ConnectOptions::allow_blocking"
            ));
        }
        let stateful = matches!(
            name.as_str(),
            "MULTI"
                | "EXEC"
                | "DISCARD"
                | "WATCH"
                | "UNWATCH"
                | "SUBSCRIBE"
                | "PSUBSCRIBE"
                | "SSUBSCRIBE"
                | "UNSUBSCRIBE"
                | "PUNSUBSCRIBE"
                | "SUNSUBSCRIBE"
                | "MONITOR"
                | "SELECT"
                | "QUIT"
                | "RESET"
                | "HELLO"
                | "AUTH"
        ) || (name == "CLIENT"
            && self
                .args
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"REPLY")));
        if stateful {
            return Some(format!(
                "{name} changes connection state that other callers share; use an atomic \
                 Pipeline for MULTI/EXEC, ConnectOptions for AUTH/SELECT/HELLO, or a dedicated \
                 connection with ConnectOptions::allow_blocking"
            ));
        }
        None
    }
}

/// Read-only commands the client may replay after a connection error.
fn is_read_only(name: &[u8]) -> bool {
    const READS: &[&str] = &[
        "GET",
        "MGET",
        "EXISTS",
        "TTL",
        "PTTL",
        "TYPE",
        "STRLEN",
        "GETRANGE",
        "HGET",
        "HMGET",
        "HGETALL",
        "HKEYS",
        "HVALS",
        "HLEN",
        "HEXISTS",
        "HSTRLEN",
        "PING",
        "ECHO",
        "DBSIZE",
        "SCAN",
        "KEYS",
        "EXPIRETIME",
        "PEXPIRETIME",
        "LRANGE",
        "LLEN",
        "SMEMBERS",
        "SCARD",
        "ZRANGE",
        "ZCARD",
        "ZSCORE",
        "INFO",
    ];
    READS
        .iter()
        .any(|r| r.as_bytes().eq_ignore_ascii_case(name))
}

/// Several commands written back to back as one unit and answered in order.
///
/// The unit is never split or interleaved with other callers' commands, so an atomic pipeline
/// (`MULTI` ... `EXEC`) is safe on a shared connection. Each command gets its own result: an
/// error reply to one does not hide the others' replies.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    cmds: Vec<Cmd>,
    atomic: bool,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// Wraps the commands in `MULTI` / `EXEC`; the result then holds the EXEC reply's items.
    pub fn atomic(mut self) -> Pipeline {
        self.atomic = true;
        self
    }

    /// Adds a command.
    pub fn with(mut self, c: Cmd) -> Pipeline {
        self.cmds.push(c);
        self
    }

    /// Adds a command in place.
    pub fn push(&mut self, c: Cmd) {
        self.cmds.push(c);
    }

    /// Number of commands (MULTI/EXEC not counted).
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Whether it is wrapped in MULTI/EXEC.
    pub fn is_atomic(&self) -> bool {
        self.atomic
    }

    /// The commands.
    pub fn cmds(&self) -> &[Cmd] {
        &self.cmds
    }

    /// The bytes to write and the number of replies to expect.
    pub(crate) fn encode(&self) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut n = self.cmds.len();
        if self.atomic {
            kvik_resp::encode::command(&mut out, &[b"MULTI"]);
            n += 2;
        }
        for c in &self.cmds {
            c.encode(&mut out);
        }
        if self.atomic {
            kvik_resp::encode::command(&mut out, &[b"EXEC"]);
        }
        (out, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_classifies() {
        let c = cmd("set").arg("k").arg(12i64).arg(b"v".as_slice());
        let mut out = Vec::new();
        c.encode(&mut out);
        assert_eq!(
            out,
            b"*4\r\n$3\r\nset\r\n$1\r\nk\r\n$2\r\n12\r\n$1\r\nv\r\n"
        );
        assert!(!c.is_idempotent());
        assert!(cmd("get").arg("k").is_idempotent());
        assert!(cmd("BLPOP").arg("k").arg(0).shared_refusal().is_some());
        assert!(cmd("xread").arg("block").arg(0).shared_refusal().is_some());
        assert!(cmd("xread").arg("count").arg(1).shared_refusal().is_none());
        assert!(cmd("multi").shared_refusal().is_some());
        assert!(cmd("get").arg("k").shared_refusal().is_none());
        let (bytes, n) = Pipeline::new().atomic().with(cmd("INCR").arg("a")).encode();
        assert_eq!(n, 3);
        assert!(bytes.starts_with(b"*1\r\n$5\r\nMULTI\r\n"));
    }
}

//! Redis 7 script flags and the `#!` first line that declares them.
//!
//! An EVAL script may start with `#!lua flags=no-writes,allow-oom`; a FUNCTION LOAD library
//! must start with `#!lua name=<lib>`, and each function declares its flags in
//! `redis.register_function`. The runtime only parses and exposes flags: the server enforces
//! them (EVAL_RO, OOM, stale replicas, cluster key checks).

/// A set of script flags (`SCRIPT_FLAG_*` in Redis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScriptFlags(u32);

impl ScriptFlags {
    /// `no-writes`: the script may only read; allowed under EVAL_RO / FCALL_RO.
    pub const NO_WRITES: ScriptFlags = ScriptFlags(1);
    /// `allow-oom`: may run (and write) when the server is over maxmemory.
    pub const ALLOW_OOM: ScriptFlags = ScriptFlags(1 << 1);
    /// `allow-stale`: may run on a stale replica.
    pub const ALLOW_STALE: ScriptFlags = ScriptFlags(1 << 2);
    /// `no-cluster`: refused in cluster mode.
    pub const NO_CLUSTER: ScriptFlags = ScriptFlags(1 << 3);
    /// `allow-cross-slot-keys`: may touch keys of several slots.
    pub const ALLOW_CROSS_SLOT: ScriptFlags = ScriptFlags(1 << 4);
    /// No shebang: an EVAL script in Redis 6 compatibility mode (flags unknown, so the
    /// server must apply the old rules: decide by the commands the script calls).
    pub const EVAL_COMPAT_MODE: ScriptFlags = ScriptFlags(1 << 5);

    /// The flag names users write, with their bits, in Redis's order.
    pub const NAMES: [(&'static str, ScriptFlags); 5] = [
        ("no-writes", ScriptFlags::NO_WRITES),
        ("allow-oom", ScriptFlags::ALLOW_OOM),
        ("allow-stale", ScriptFlags::ALLOW_STALE),
        ("no-cluster", ScriptFlags::NO_CLUSTER),
        ("allow-cross-slot-keys", ScriptFlags::ALLOW_CROSS_SLOT),
    ];

    /// No flag.
    pub const fn empty() -> ScriptFlags {
        ScriptFlags(0)
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: ScriptFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits (stable: they are written in FUNCTION DUMP payloads).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Flags from raw bits; unknown bits are dropped.
    pub const fn from_bits(bits: u32) -> ScriptFlags {
        ScriptFlags(bits & 0x3f)
    }

    /// The flag named `name`, if it is one users may write.
    pub fn from_name(name: &[u8]) -> Option<ScriptFlags> {
        Self::NAMES
            .iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(_, f)| *f)
    }

    /// Whether EVAL_RO / EVALSHA_RO / FCALL_RO may run a script with these flags: Redis
    /// refuses a declared script without `no-writes` before running it
    /// ([`crate::errors::RO_WITH_WRITE_FLAG`]); a script without shebang runs, and its writes
    /// are refused one by one ([`crate::errors::WRITE_FROM_READONLY`], by the host).
    pub fn check_read_only(self) -> Result<(), &'static str> {
        if self.contains(ScriptFlags::NO_WRITES) || self.contains(ScriptFlags::EVAL_COMPAT_MODE) {
            Ok(())
        } else {
            Err(crate::errors::RO_WITH_WRITE_FLAG)
        }
    }

    /// The names of the user-visible flags that are set, in Redis's order (FUNCTION LIST).
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(_, f)| self.contains(*f))
            .map(|(n, _)| *n)
            .collect()
    }
}

impl std::ops::BitOr for ScriptFlags {
    type Output = ScriptFlags;
    fn bitor(self, o: ScriptFlags) -> ScriptFlags {
        ScriptFlags(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for ScriptFlags {
    fn bitor_assign(&mut self, o: ScriptFlags) {
        self.0 |= o.0;
    }
}

/// The shebang line (without its `\n`) and its words, or `None` when `body` has none.
/// `Err(())` when it starts with `#!` but has no end of line.
/// The shebang line's length and words.
type Shebang<'a> = (usize, Vec<&'a [u8]>);

fn shebang_words(body: &[u8]) -> Option<Result<Shebang<'_>, ()>> {
    if !body.starts_with(b"#!") {
        return None;
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Some(Err(()));
    };
    let words = body[..end]
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    Some(Ok((end, words)))
}

/// An EVAL script's flags and the length of its shebang line (the Lua code starts there, so
/// line numbers stay right). Errors are Redis's texts, `ERR ` included.
pub fn parse_eval_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    let (len, words) = match shebang_words(body) {
        None => return Ok((ScriptFlags::EVAL_COMPAT_MODE, 0)),
        Some(Err(())) => return Err("ERR Invalid script shebang".into()),
        Some(Ok(s)) => s,
    };
    let Some(engine) = words.first() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if *engine != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = ScriptFlags::empty();
    for w in &words[1..] {
        let Some(list) = w.strip_prefix(b"flags=") else {
            return Err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(w)
            ));
        };
        for name in list.split(|&c| c == b',') {
            if name.is_empty() {
                continue;
            }
            flags |= ScriptFlags::from_name(name).ok_or_else(|| {
                format!(
                    "ERR Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                )
            })?;
        }
    }
    Ok((flags, len))
}

/// A FUNCTION LOAD payload's engine and library name (`#!lua name=mylib`) and the length of
/// the metadata line. Errors are Redis's texts, `ERR ` included.
pub fn parse_library_metadata(code: &[u8]) -> Result<(String, String, usize), String> {
    let (len, words) = match shebang_words(code) {
        None => return Err("ERR Missing library metadata".into()),
        Some(Err(())) => return Err("ERR Invalid library metadata".into()),
        Some(Ok(s)) => s,
    };
    let Some(first) = words.first() else {
        return Err("ERR Invalid library metadata".into());
    };
    let engine = String::from_utf8_lossy(&first[2..]).into_owned();
    let mut name = None;
    for w in &words[1..] {
        if w.len() >= 5 && w[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&w[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(w)
        ));
    }
    let name = name.ok_or_else(|| "ERR Library name was not given".to_string())?;
    Ok((engine, name, len))
}

/// Redis's rule for library and function names: letters, digits and `_`, at least one.
pub fn is_valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_shebang() {
        assert_eq!(
            parse_eval_shebang(b"return 1"),
            Ok((ScriptFlags::EVAL_COMPAT_MODE, 0))
        );
        let (f, len) = parse_eval_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.contains(ScriptFlags::NO_WRITES | ScriptFlags::ALLOW_OOM));
        assert!(!f.contains(ScriptFlags::EVAL_COMPAT_MODE));
        assert_eq!(len, 31);
        assert_eq!(
            parse_eval_shebang(b"#!lua\n").unwrap().0,
            ScriptFlags::empty()
        );
        assert_eq!(
            parse_eval_shebang(b"#!lua"),
            Err("ERR Invalid script shebang".into())
        );
        assert_eq!(
            parse_eval_shebang(b"#!py\n"),
            Err("ERR Unexpected engine in script shebang: #!py".into())
        );
        assert_eq!(
            parse_eval_shebang(b"#!lua flags=bad\n"),
            Err("ERR Unexpected flag in script shebang: bad".into())
        );
        assert_eq!(
            parse_eval_shebang(b"#!lua x=1\n"),
            Err("ERR Unknown lua shebang option: x=1".into())
        );
        assert_eq!(ScriptFlags::NO_WRITES.names(), vec!["no-writes"]);
        assert_eq!(ScriptFlags::NO_WRITES.check_read_only(), Ok(()));
        assert_eq!(ScriptFlags::EVAL_COMPAT_MODE.check_read_only(), Ok(()));
        assert_eq!(
            ScriptFlags::ALLOW_OOM.check_read_only(),
            Err(crate::errors::RO_WITH_WRITE_FLAG)
        );
    }

    #[test]
    fn library_metadata() {
        assert_eq!(
            parse_library_metadata(b"#!lua name=lib\nx"),
            Ok(("lua".into(), "lib".into(), 14))
        );
        assert!(parse_library_metadata(b"return").is_err());
        assert_eq!(
            parse_library_metadata(b"#!lua\n"),
            Err("ERR Library name was not given".into())
        );
        assert_eq!(
            parse_library_metadata(b"#!lua name=a name=b\n"),
            Err("ERR Invalid metadata value, name argument was given multiple times".into())
        );
        assert!(is_valid_name(b"a_1"));
        assert!(!is_valid_name(b"a-1"));
        assert!(!is_valid_name(b""));
    }
}

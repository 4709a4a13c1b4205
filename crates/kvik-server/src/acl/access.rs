//! What a command does to its keys and channels, for the ACL check: Redis 7.0's key-spec access
//! flags reduced to the two permissions ACL rules grant (`%R~` read, `%W~` write), and the
//! arguments that name pub/sub channels.
//!
//! A key needs read permission when the command returns or uses its data (Redis's `ACCESS`
//! flag) and write permission when the command inserts, updates or deletes it. The default
//! follows the spec's flags (a read-only command reads its keys, a write command writes them);
//! [`EXCEPTIONS`] lists the commands whose keys differ, as Redis's key specs declare them.

use crate::cmd::{table, Entry};
use std::sync::OnceLock;

/// The permissions one key of a command needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm {
    pub read: bool,
    pub write: bool,
}

const R: Perm = Perm {
    read: true,
    write: false,
};
const W: Perm = Perm {
    read: false,
    write: true,
};
const RW: Perm = Perm {
    read: true,
    write: true,
};
/// Touches the key without reading its value (EXISTS, TYPE, STRLEN ...): any pattern that
/// matches the key grants it, `%R~` or `%W~`.
const NONE: Perm = Perm {
    read: false,
    write: false,
};

/// How one command's keys are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAccess {
    /// The first key needs `first`, every other key `rest` (SUNIONSTORE: W then R).
    Keys { first: Perm, rest: Perm },
    /// SET: write only, read and write with its GET option (Redis's variable key flags).
    Set,
    /// The key positions name shard channels, not keys (SPUBLISH, SSUBSCRIBE ...).
    NotKeys,
}

/// Commands whose keys need other permissions than their flags suggest (Redis 7.0 key specs).
const EXCEPTIONS: &[(&str, KeyAccess)] = &[
    ("set", KeyAccess::Set),
    ("spublish", KeyAccess::NotKeys),
    ("ssubscribe", KeyAccess::NotKeys),
    ("sunsubscribe", KeyAccess::NotKeys),
    // Read and write: the reply carries the key's data, or the write depends on it.
    ("bitfield", keys(RW, RW)),
    ("blmpop", keys(RW, RW)),
    ("blpop", keys(RW, RW)),
    ("brpop", keys(RW, RW)),
    ("bzmpop", keys(RW, RW)),
    ("bzpopmax", keys(RW, RW)),
    ("bzpopmin", keys(RW, RW)),
    ("decr", keys(RW, RW)),
    ("decrby", keys(RW, RW)),
    ("eval", keys(RW, RW)),
    ("evalsha", keys(RW, RW)),
    ("fcall", keys(RW, RW)),
    ("getdel", keys(RW, RW)),
    ("getex", keys(RW, RW)),
    ("getset", keys(RW, RW)),
    ("hincrby", keys(RW, RW)),
    ("hincrbyfloat", keys(RW, RW)),
    ("incr", keys(RW, RW)),
    ("incrby", keys(RW, RW)),
    ("incrbyfloat", keys(RW, RW)),
    ("lmpop", keys(RW, RW)),
    ("lpop", keys(RW, RW)),
    ("migrate", keys(RW, RW)),
    ("move", keys(RW, RW)),
    ("rpop", keys(RW, RW)),
    ("setbit", keys(RW, RW)),
    ("spop", keys(RW, RW)),
    ("zincrby", keys(RW, RW)),
    ("zmpop", keys(RW, RW)),
    ("zpopmax", keys(RW, RW)),
    ("zpopmin", keys(RW, RW)),
    // A source that is read and deleted, then a destination that is written.
    ("blmove", keys(RW, W)),
    ("brpoplpush", keys(RW, W)),
    ("lmove", keys(RW, W)),
    ("rename", keys(RW, W)),
    ("renamenx", keys(RW, W)),
    ("rpoplpush", keys(RW, W)),
    ("smove", keys(RW, W)),
    ("pfmerge", keys(RW, R)),
    // A destination written from sources that are read.
    ("bitop", keys(W, R)),
    ("geosearchstore", keys(W, R)),
    ("sdiffstore", keys(W, R)),
    ("sinterstore", keys(W, R)),
    ("sunionstore", keys(W, R)),
    ("zdiffstore", keys(W, R)),
    ("zinterstore", keys(W, R)),
    ("zrangestore", keys(W, R)),
    ("zunionstore", keys(W, R)),
    // A source that is read, then destinations (STORE) that are written.
    ("copy", keys(R, W)),
    ("georadius", keys(R, W)),
    ("georadiusbymember", keys(R, W)),
    ("sort", keys(R, W)),
    // Only the key's existence, type, length or metadata.
    ("exists", keys(NONE, NONE)),
    ("hexists", keys(NONE, NONE)),
    ("hlen", keys(NONE, NONE)),
    ("hstrlen", keys(NONE, NONE)),
    ("llen", keys(NONE, NONE)),
    ("memory|usage", keys(NONE, NONE)),
    ("object|encoding", keys(NONE, NONE)),
    ("object|freq", keys(NONE, NONE)),
    ("object|idletime", keys(NONE, NONE)),
    ("object|refcount", keys(NONE, NONE)),
    ("scard", keys(NONE, NONE)),
    ("sismember", keys(NONE, NONE)),
    ("strlen", keys(NONE, NONE)),
    ("touch", keys(NONE, NONE)),
    ("type", keys(NONE, NONE)),
    ("watch", keys(NONE, NONE)),
    ("xlen", keys(NONE, NONE)),
    ("zcard", keys(NONE, NONE)),
];

const fn keys(first: Perm, rest: Perm) -> KeyAccess {
    KeyAccess::Keys { first, rest }
}

/// The key access of every table entry, by entry id.
fn by_entry() -> &'static [KeyAccess] {
    static ACCESS: OnceLock<Vec<KeyAccess>> = OnceLock::new();
    ACCESS.get_or_init(|| {
        let t = table();
        (0..t.len())
            .map(|id| {
                let e = t.entry(id);
                EXCEPTIONS
                    .iter()
                    .find(|(name, _)| *name == e.full_name)
                    .map(|(_, a)| *a)
                    .unwrap_or_else(|| default_access(e))
            })
            .collect()
    })
}

fn default_access(e: &Entry) -> KeyAccess {
    use crate::cmd::spec::Flags;
    let p = if e.spec.flags.contains(Flags::WRITE) {
        W
    } else if e.spec.flags.contains(Flags::READONLY) {
        R
    } else {
        RW
    };
    keys(p, p)
}

/// The key arguments of `args` with the permission each needs (empty for commands without keys).
pub fn keys_of(entry: &Entry, args: &[bytes::Bytes]) -> Vec<(usize, Perm)> {
    let access = by_entry()[entry.id];
    let positions = entry.spec.key_positions(args);
    match access {
        KeyAccess::NotKeys => Vec::new(),
        KeyAccess::Set => {
            let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
            positions
                .into_iter()
                .map(|p| (p, if get { RW } else { W }))
                .collect()
        }
        KeyAccess::Keys { first, rest } => positions
            .into_iter()
            .enumerate()
            .filter(|(_, p)| *p < args.len())
            .map(|(i, p)| (p, if i == 0 { first } else { rest }))
            .collect(),
    }
}

/// How a command names channels: from which argument, and whether they are patterns
/// (PSUBSCRIBE: a pattern is allowed only when a user's channel rule is that same pattern).
#[derive(Clone, Copy, Debug)]
pub struct Channels {
    pub from: usize,
    /// Only the argument at `from` (PUBLISH), else every argument from there on.
    pub one: bool,
    pub pattern: bool,
}

/// The commands whose arguments name channels that ACL rules govern (publishing and
/// subscribing; unsubscribing is always allowed): (name, only the first, patterns).
const CHANNEL_COMMANDS: &[(&str, bool, bool)] = &[
    ("publish", true, false),
    ("spublish", true, false),
    ("subscribe", false, false),
    ("ssubscribe", false, false),
    ("psubscribe", false, true),
];

/// The channels of a command, if it names any (a table lookup: this runs for every command of
/// a user without `allchannels`).
pub fn channels_of(entry: &Entry) -> Option<Channels> {
    static BY_ENTRY: OnceLock<Vec<Option<Channels>>> = OnceLock::new();
    BY_ENTRY.get_or_init(|| {
        let t = table();
        (0..t.len())
            .map(|id| {
                let name = &t.entry(id).full_name;
                CHANNEL_COMMANDS
                    .iter()
                    .find(|(n, _, _)| n == name)
                    .map(|&(_, one, pattern)| Channels {
                        from: 1,
                        one,
                        pattern,
                    })
            })
            .collect()
    })[entry.id]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches typos; a subcommand of a container kvik does not have yet (MEMORY) is kept for
    /// when it comes.
    #[test]
    fn every_exception_names_a_command() {
        let names = table().names();
        for (name, _) in EXCEPTIONS {
            let container = name.split('|').next().unwrap();
            if name.contains('|') && table().lookup(container.as_bytes()).is_none() {
                continue;
            }
            assert!(names.iter().any(|n| n == name), "{name} is not a command");
        }
    }

    #[test]
    fn set_needs_read_only_with_get() {
        let t = table();
        let set = t.lookup(b"set").unwrap();
        let args: Vec<bytes::Bytes> = vec!["set".into(), "k".into(), "v".into()];
        assert_eq!(keys_of(set, &args), vec![(1, W)]);
        let args: Vec<bytes::Bytes> = vec!["set".into(), "k".into(), "v".into(), "GET".into()];
        assert_eq!(keys_of(set, &args), vec![(1, RW)]);
        let sus = t.lookup(b"sunionstore").unwrap();
        let args: Vec<bytes::Bytes> = vec!["sunionstore".into(), "d".into(), "a".into()];
        assert_eq!(keys_of(sus, &args), vec![(1, W), (2, R)]);
    }
}

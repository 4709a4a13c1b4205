//! Keyspace and keyevent notifications (`notify-keyspace-events`): Redis's flag letters, the
//! event classes and names, and how an event becomes pub/sub messages.
//!
//! Write commands name their events in their specs (`CommandSpec::event`, see `cmd::spec`)
//! and emit them with `Ctx::notify` once the write committed; the storage's commit reports the
//! two events no handler knows about, `expired` (a record already expired when a write or the
//! active expiry cycle removed or replaced it) and `new` (a key created), through
//! [`crate::storage::WriteObserver::keys_changed`]. With notifications off (the default) an
//! event costs one atomic load.

use bitflags::bitflags;

bitflags! {
    /// The classes and targets of `notify-keyspace-events`, Redis's `NOTIFY_*` bits.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct NotifyFlags: u32 {
        /// K: publish to `__keyspace@<db>__:<key>`.
        const KEYSPACE = 1 << 0;
        /// E: publish to `__keyevent@<db>__:<event>`.
        const KEYEVENT = 1 << 1;
        const GENERIC = 1 << 2;
        const STRING = 1 << 3;
        const LIST = 1 << 4;
        const SET = 1 << 5;
        const HASH = 1 << 6;
        const ZSET = 1 << 7;
        const EXPIRED = 1 << 8;
        const EVICTED = 1 << 9;
        const STREAM = 1 << 10;
        /// m: key misses (not part of A, as in Redis).
        const KEY_MISS = 1 << 11;
        /// d: module events (kvik has no modules; kept so the setting reads back as written).
        const MODULE = 1 << 13;
        /// n: key created (not part of A, as in Redis).
        const NEW = 1 << 14;
        /// A: every class but m and n.
        const ALL = Self::GENERIC.bits() | Self::STRING.bits() | Self::LIST.bits()
            | Self::SET.bits() | Self::HASH.bits() | Self::ZSET.bits() | Self::EXPIRED.bits()
            | Self::EVICTED.bits() | Self::STREAM.bits() | Self::MODULE.bits();
    }
}

/// The class letters in the order Redis prints them when not all of A is set.
const CLASS_LETTERS: &[(char, NotifyFlags)] = &[
    ('g', NotifyFlags::GENERIC),
    ('$', NotifyFlags::STRING),
    ('l', NotifyFlags::LIST),
    ('s', NotifyFlags::SET),
    ('h', NotifyFlags::HASH),
    ('z', NotifyFlags::ZSET),
    ('x', NotifyFlags::EXPIRED),
    ('e', NotifyFlags::EVICTED),
    ('t', NotifyFlags::STREAM),
    ('d', NotifyFlags::MODULE),
    ('n', NotifyFlags::NEW),
];

/// The letters printed after the classes, in Redis's order.
const TARGET_LETTERS: &[(char, NotifyFlags)] = &[
    ('K', NotifyFlags::KEYSPACE),
    ('E', NotifyFlags::KEYEVENT),
    ('m', NotifyFlags::KEY_MISS),
];

/// Parses a `notify-keyspace-events` value as Redis's `keyspaceEventsStringToFlags`.
pub fn parse_flags(s: &str) -> Result<NotifyFlags, String> {
    let mut flags = NotifyFlags::empty();
    for c in s.chars() {
        flags |= match c {
            'A' => NotifyFlags::ALL,
            c => CLASS_LETTERS
                .iter()
                .chain(TARGET_LETTERS)
                .find(|(l, _)| *l == c)
                .map(|(_, f)| *f)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?,
        };
    }
    Ok(flags)
}

/// The canonical string CONFIG GET shows, as Redis's `keyspaceEventsFlagsToString`.
pub fn render_flags(flags: NotifyFlags) -> String {
    let mut s = String::new();
    if flags.contains(NotifyFlags::ALL) {
        s.push('A');
    } else {
        s.extend(
            CLASS_LETTERS
                .iter()
                .filter(|(_, f)| flags.contains(*f))
                .map(|(c, _)| c),
        );
    }
    s.extend(
        TARGET_LETTERS
            .iter()
            .filter(|(_, f)| flags.contains(*f))
            .map(|(c, _)| c),
    );
    s
}

/// The class of an event: which letter of `notify-keyspace-events` enables it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// g: DEL, EXPIRE, RENAME ... (type-independent).
    Generic,
    /// $: string commands.
    String,
    /// l: list commands.
    List,
    /// s: set commands.
    Set,
    /// h: hash commands.
    Hash,
    /// z: sorted set commands.
    ZSet,
    /// t: stream commands.
    Stream,
    /// x: a key expired.
    Expired,
    /// e: a key was evicted (kvik never evicts keys from its data set).
    Evicted,
    /// n: a key was created.
    New,
}

impl Class {
    pub const fn flag(self) -> NotifyFlags {
        match self {
            Class::Generic => NotifyFlags::GENERIC,
            Class::String => NotifyFlags::STRING,
            Class::List => NotifyFlags::LIST,
            Class::Set => NotifyFlags::SET,
            Class::Hash => NotifyFlags::HASH,
            Class::ZSet => NotifyFlags::ZSET,
            Class::Stream => NotifyFlags::STREAM,
            Class::Expired => NotifyFlags::EXPIRED,
            Class::Evicted => NotifyFlags::EVICTED,
            Class::New => NotifyFlags::NEW,
        }
    }
}

/// One event a command may emit: its class and Redis's name for it ("set", "lpop", "del" ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub class: Class,
    pub name: &'static str,
}

/// The channel of a keyspace (`__keyspace@<db>__:<key>`) or keyevent
/// (`__keyevent@<db>__:<event>`) message.
pub fn channel(kind: &str, db: u16, suffix: &[u8]) -> Vec<u8> {
    let mut c = format!("__{kind}@{db}__:").into_bytes();
    c.extend_from_slice(suffix);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_back_as_redis_prints_them() {
        for (given, shown) in [
            ("KEA", "AKE"),
            ("Kgn", "gnK"),
            ("AKEmn", "AKEm"),
            ("g$lshzxetdKE", "AKE"),
            ("E", "E"),
            ("", ""),
            ("Ex$", "$xE"),
        ] {
            assert_eq!(render_flags(parse_flags(given).unwrap()), shown, "{given}");
        }
        assert_eq!(
            parse_flags("KEq").unwrap_err(),
            "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        );
    }
}

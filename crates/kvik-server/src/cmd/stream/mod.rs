//! Stream commands: XADD XTRIM XDEL XSETID XLEN (`add`), XRANGE XREVRANGE XREAD XREADGROUP
//! (`read`), XGROUP XACK XPENDING XCLAIM XAUTOCLAIM (`groups`), XINFO (`info`).
//!
//! A stream is a meta record (kind, expiry, version, length and the stream state: last ID,
//! largest deleted ID, entries added, first ID) plus tagged records in the data CF under its
//! version: entries keyed by their 16-byte ID, groups, consumers and pending entries (layout in
//! `storage::encoding`, codecs in `storage::stream`). [`store::Stream`] is the one way commands
//! read and write them. Every write puts the meta record, which drops a cached copy, marks
//! WATCHers dirty and wakes clients blocked on the stream.

mod add;
mod groups;
mod ids;
mod info;
mod read;
mod store;

use super::spec::{container, Class, CommandSpec, Flags, KeySpec};

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE: Flags = Flags::WRITE;
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);

const ACL_READ_FAST: &[&str] = &["read", "stream", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "stream", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "stream", "fast"];
const ACL_WRITE_SLOW: &[&str] = &["write", "stream", "slow"];

/// The key of XGROUP's and XINFO's subcommands: `XGROUP CREATE <key> ...`.
const SECOND: KeySpec = KeySpec {
    first: 2,
    last: 2,
    step: 1,
};

/// A stream command: its group, ACL categories and, for writes, the cache effect (every write
/// puts the meta record, which drops a cached copy).
const fn x(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: super::spec::Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    super::spec::collection_command("stream", name, arity, flags, keys, handler, acl)
}

pub static COMMANDS: &[CommandSpec] = &[
    x(
        "xadd",
        -5,
        WRITE_OOM_FAST,
        KeySpec::ONE,
        add::xadd,
        ACL_WRITE_FAST,
    )
    .rtc_write()
    .event(Class::Stream, "xadd")
    .event(Class::Stream, "xtrim")
    .doc(
        "Appends a new message to a stream. Creates the key if it doesn't exist.",
        "5.0.0",
        "O(1) when adding a new entry, O(N) when trimming where N being the number of entries \
         evicted.",
    ),
    x("xtrim", -4, WRITE, KeySpec::ONE, add::xtrim, ACL_WRITE_SLOW)
        .event(Class::Stream, "xtrim")
        .doc(
            "Deletes messages from the beginning of a stream.",
            "5.0.0",
            "O(N), with N being the number of evicted entries. Constant times are very small \
         however, since entries are organized in macro nodes containing multiple entries that \
         can be released with a single deallocation.",
        ),
    x(
        "xdel",
        -3,
        WRITE_FAST,
        KeySpec::ONE,
        add::xdel,
        ACL_WRITE_FAST,
    )
    .event(Class::Stream, "xdel")
    .doc(
        "Returns the number of messages after removing them from a stream.",
        "5.0.0",
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
    ),
    x(
        "xsetid",
        -3,
        WRITE_OOM_FAST,
        KeySpec::ONE,
        add::xsetid,
        ACL_WRITE_FAST,
    )
    .event(Class::Stream, "xsetid")
    .doc(
        "An internal command for replicating stream values.",
        "5.0.0",
        "O(1)",
    ),
    x("xlen", 2, READ_FAST, KeySpec::ONE, add::xlen, ACL_READ_FAST)
        .rtc_nowait_read()
        .doc(
            "Return the number of messages in a stream.",
            "5.0.0",
            "O(1)",
        ),
    x(
        "xrange",
        -4,
        READ,
        KeySpec::ONE,
        read::xrange,
        ACL_READ_SLOW,
    )
    .rtc_nowait_read()
    .doc(
        "Returns the messages from a stream within a range of IDs.",
        "5.0.0",
        "O(N) with N being the number of elements being returned. If N is constant (e.g. \
         always asking for the first 10 elements with COUNT), you can consider it O(1).",
    ),
    x(
        "xrevrange",
        -4,
        READ,
        KeySpec::ONE,
        read::xrevrange,
        ACL_READ_SLOW,
    )
    .rtc_nowait_read()
    .doc(
        "Returns the messages from a stream within a range of IDs in reverse order.",
        "5.0.0",
        "O(N) with N being the number of elements returned. If N is constant (e.g. always \
         asking for the first 10 elements with COUNT), you can consider it O(1).",
    ),
    x(
        "xread",
        -4,
        READ.union(Flags::BLOCKING),
        KeySpec::NONE,
        read::xread,
        &["read", "stream", "slow", "blocking"],
    )
    .movable(read::read_keys)
    .rtc_nowait_read()
    .doc(
        "Returns messages from multiple streams with IDs greater than the ones requested. \
         Blocks until a message is available otherwise.",
        "5.0.0",
        "For each stream mentioned: O(N) with N being the number of elements being returned, \
         it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is \
         used, XADD will pay O(M) time in order to serve the M clients blocked on the stream \
         getting new data.",
    ),
    x(
        "xreadgroup",
        -7,
        WRITE.union(Flags::BLOCKING),
        KeySpec::NONE,
        read::xreadgroup,
        &["write", "stream", "slow", "blocking"],
    )
    .movable(read::read_keys)
    .rtc_write()
    .event(Class::Stream, "xgroup-createconsumer")
    .doc(
        "Returns new or historical messages from a stream for a consumer in a group. Blocks \
         until a message is available otherwise.",
        "5.0.0",
        "For each stream mentioned: O(M) with M being the number of elements returned. If M is \
         constant (e.g. always asking for the first 10 elements with COUNT), you can consider \
         it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in \
         order to serve the N clients blocked on the stream getting new data.",
    ),
    x(
        "xack",
        -4,
        WRITE_FAST,
        KeySpec::ONE,
        groups::xack,
        ACL_WRITE_FAST,
    )
    .rtc_write()
    .no_events()
    .doc(
        "Returns the number of messages that were successfully acknowledged by the consumer \
         group member of a stream.",
        "5.0.0",
        "O(1) for each message ID processed.",
    ),
    x(
        "xpending",
        -3,
        READ,
        KeySpec::ONE,
        groups::xpending,
        ACL_READ_SLOW,
    )
    .doc(
        "Returns the information and entries from a stream consumer group's pending entries \
         list.",
        "5.0.0",
        "O(N) with N being the number of elements returned, so asking for a small fixed number \
         of entries per call is O(1). O(M), where M is the total number of entries scanned when \
         used with the IDLE filter. When the command returns just the summary and the list of \
         consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for \
         iterating every consumer.",
    ),
    x(
        "xclaim",
        -6,
        WRITE_FAST,
        KeySpec::ONE,
        groups::xclaim,
        ACL_WRITE_FAST,
    )
    .event(Class::Stream, "xgroup-createconsumer")
    .doc(
        "Changes, or acquires, ownership of a message in a consumer group, as if the message \
         was delivered a consumer group member.",
        "5.0.0",
        "O(log N) with N being the number of messages in the PEL of the consumer group.",
    ),
    x(
        "xautoclaim",
        -6,
        WRITE_FAST,
        KeySpec::ONE,
        groups::xautoclaim,
        ACL_WRITE_FAST,
    )
    .event(Class::Stream, "xgroup-createconsumer")
    .doc(
        "Changes, or acquires, ownership of messages in a consumer group, as if the messages \
         were delivered to as consumer group member.",
        "6.2.0",
        "O(1) if COUNT is small.",
    ),
    CommandSpec::new("xgroup", -2, Flags::empty(), KeySpec::NONE, container)
        .acl(&["slow"])
        .group("stream")
        .doc(
            "A container for consumer groups commands.",
            "5.0.0",
            "Depends on subcommand.",
        )
        .subs(XGROUP_SUBCOMMANDS),
    CommandSpec::new("xinfo", -2, Flags::empty(), KeySpec::NONE, container)
        .acl(&["slow"])
        .group("stream")
        .doc(
            "A container for stream introspection commands.",
            "5.0.0",
            "Depends on subcommand.",
        )
        .subs(XINFO_SUBCOMMANDS),
];

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    x(
        "create",
        -5,
        WRITE_OOM,
        SECOND,
        groups::create,
        ACL_WRITE_SLOW,
    )
    .event(Class::Stream, "xgroup-create")
    .doc("Creates a consumer group.", "5.0.0", "O(1)"),
    x("setid", -5, WRITE, SECOND, groups::setid, ACL_WRITE_SLOW)
        .event(Class::Stream, "xgroup-setid")
        .doc(
            "Sets the last-delivered ID of a consumer group.",
            "5.0.0",
            "O(1)",
        ),
    x("destroy", 4, WRITE, SECOND, groups::destroy, ACL_WRITE_SLOW)
        .event(Class::Stream, "xgroup-destroy")
        .doc(
            "Destroys a consumer group.",
            "5.0.0",
            "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        ),
    x(
        "createconsumer",
        5,
        WRITE_OOM,
        SECOND,
        groups::createconsumer,
        ACL_WRITE_SLOW,
    )
    .event(Class::Stream, "xgroup-createconsumer")
    .doc("Creates a consumer in a consumer group.", "6.2.0", "O(1)"),
    x(
        "delconsumer",
        5,
        WRITE,
        SECOND,
        groups::delconsumer,
        ACL_WRITE_SLOW,
    )
    .event(Class::Stream, "xgroup-delconsumer")
    .doc("Deletes a consumer from a consumer group.", "5.0.0", "O(1)"),
    help_spec(groups::help),
];

/// The HELP subcommand of XGROUP and XINFO.
const fn help_spec(handler: super::spec::Handler) -> CommandSpec {
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        handler,
    )
    .acl(&["stream", "slow"])
    .group("stream")
    .doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "O(1)",
    )
}

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    x("stream", -3, READ, SECOND, info::stream, ACL_READ_SLOW).doc(
        "Returns information about a stream.",
        "5.0.0",
        "O(1)",
    ),
    x("groups", 3, READ, SECOND, info::groups, ACL_READ_SLOW).doc(
        "Returns a list of the consumer groups of a stream.",
        "5.0.0",
        "O(1)",
    ),
    x("consumers", 4, READ, SECOND, info::consumers, ACL_READ_SLOW).doc(
        "Returns a list of the consumers in a consumer group.",
        "5.0.0",
        "O(1)",
    ),
    help_spec(info::help),
];

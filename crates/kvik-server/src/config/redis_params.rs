//! Redis 7.0's parameters that mean nothing for kvik (replication, RDB/AOF files, TLS, small
//! encodings, defragmentation ...): one row each, so CONFIG GET / SET and the config file accept
//! every redis.conf parameter with Redis's value syntax, store it and report it back in Redis's
//! canonical form. Parameters kvik acts on live in [`super::SETTINGS`]; a row whose name or alias
//! is also a setting there is shadowed by it. docs/compatibility.md lists these rows as "no
//! effect", with the reason given here. A few rows ([`IN_EFFECT`]: the ACL's `aclfile`,
//! `acllog-max-len`, `acl-pubsub-default`, `protected-mode`) act as in Redis: the code that
//! needs them reads their stored value.

use super::{parse_bool, parse_memory};

/// A parameter's value syntax, as Redis's config types.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// An integer in `min..=max`.
    Int(i64, i64),
    /// A memory size (`100mb`) in `min..=max` bytes.
    Memory(u64, u64),
    /// A memory size or a percentage (`10%`) of maxmemory.
    MemoryOrPercent,
    /// One of these words (case-insensitive; shown lowercase).
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
    /// `seconds changes` pairs, or empty.
    Save,
    /// Exactly this many integers in `min..=max`, separated by spaces.
    Ints(usize, i64, i64),
    /// Percentiles (0 to 100) separated by spaces, possibly none.
    Percentiles,
    /// An octal file mode.
    Octal,
    /// Letters, digits, hyphens and dots.
    Hostname,
}

/// One Redis parameter kvik accepts without acting on it.
pub struct Param {
    pub name: &'static str,
    /// Legacy names Redis still accepts (`slave-*`, `*-ziplist-*`).
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    /// Redis 7.0's default, in its canonical form.
    pub default: &'static str,
    /// Whether CONFIG SET may change it (as in Redis).
    pub mutable: bool,
    /// Why it has no effect in kvik; [`IN_EFFECT`] for a parameter that acts as in Redis.
    pub no_effect: &'static str,
}

const I32: i64 = i32::MAX as i64;
const I64: i64 = i64::MAX;
const U64: u64 = i64::MAX as u64;

const REPL: &str = "kvik's replication follows RocksDB's WAL and does not use it (its retention: repl-wal-ttl, repl-wal-size-limit)";
const CLUSTER_BUS: &str = "kvik's cluster topology is pushed with CLUSTER SETTOPOLOGY; there is no cluster bus or failover";
const RDB: &str = "kvik writes no RDB files; RocksDB persists every write";
const AOF: &str = "kvik writes no AOF; RocksDB's WAL logs every write (see appendfsync)";
const TLS: &str = "kvik has no TLS listener";
const ENCODING: &str = "kvik stores collections in RocksDB, without Redis's small encodings";
const DEFRAG: &str =
    "kvik's memory is RocksDB's and the hot cache's; there is no jemalloc defragmenter";
const EVICTION: &str = "kvik never evicts: data beyond maxmemory stays on disk";
const LAZYFREE: &str =
    "deletes in kvik are RocksDB tombstones; there is nothing to free in the background";
const PROCESS: &str = "kvik's process handling (daemon, pid file, syslog, signals) differs; run it under a supervisor";
const STREAM_NODES: &str =
    "kvik stores each stream entry as its own RocksDB record: there are no listpack nodes to size";
const HLL_SPARSE: &str = "HyperLogLogs turn dense past Redis's default, 3000 bytes, always";
/// The one row kvik acts on: the server reads it from here (see `crate::tracking`).
const TRACKING: &str =
    "not stored without effect: it bounds CLIENT TRACKING's table (read by the server)";
const ALWAYS: &str = "always on in kvik";
/// A row that acts as in Redis (its value is read where it matters, e.g. by `crate::acl`); it
/// is a row here for Redis's value syntax, default and CONFIG GET / SET.
pub const IN_EFFECT: &str = "";

const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];

macro_rules! p {
    ($name:literal, [$($alias:literal),*], $kind:expr, $default:literal, $mutable:literal, $why:expr) => {
        Param {
            name: $name,
            aliases: &[$($alias),*],
            kind: $kind,
            default: $default,
            mutable: $mutable,
            no_effect: $why,
        }
    };
}

use Kind::*;

/// Every Redis 7.0 parameter kvik accepts without acting on it: name, aliases, value syntax,
/// Redis's default, whether CONFIG SET may change it, and why it has no effect.
#[rustfmt::skip]
pub static REDIS_PARAMS: &[Param] = &[
    p!("acl-pubsub-default", [], Enum(&["allchannels", "resetchannels"]), "resetchannels", true, IN_EFFECT),
    p!("aclfile", [], Str, "", false, IN_EFFECT),
    p!("acllog-max-len", [], Int(0, I64), "128", true, IN_EFFECT),
    p!("active-defrag-cycle-max", [], Int(1, 99), "25", true, DEFRAG),
    p!("active-defrag-cycle-min", [], Int(1, 99), "1", true, DEFRAG),
    p!("active-defrag-ignore-bytes", [], Memory(1, U64), "104857600", true, DEFRAG),
    p!("active-defrag-max-scan-fields", [], Int(1, I64), "1000", true, DEFRAG),
    p!("active-defrag-threshold-lower", [], Int(0, 1000), "10", true, DEFRAG),
    p!("active-defrag-threshold-upper", [], Int(0, 1000), "100", true, DEFRAG),
    p!("activedefrag", [], Bool, "no", true, DEFRAG),
    p!("activerehashing", [], Bool, "yes", true, "kvik has no main hash table to rehash"),
    p!("always-show-logo", [], Bool, "no", false, PROCESS),
    p!("aof-disable-auto-gc", [], Bool, "no", true, AOF),
    p!("aof-load-truncated", [], Bool, "yes", true, AOF),
    p!("aof-rewrite-incremental-fsync", [], Bool, "yes", true, AOF),
    p!("aof-timestamp-enabled", [], Bool, "no", true, AOF),
    p!("aof-use-rdb-preamble", [], Bool, "yes", true, AOF),
    p!("aof_rewrite_cpulist", [], Str, "", false, AOF),
    p!("appenddirname", [], Str, "appendonlydir", false, AOF),
    p!("appendfilename", [], Str, "appendonly.aof", false, AOF),
    p!("auto-aof-rewrite-min-size", [], Memory(0, U64), "67108864", true, AOF),
    p!("auto-aof-rewrite-percentage", [], Int(0, I32), "100", true, AOF),
    p!("bgsave_cpulist", [], Str, "", false, RDB),
    p!("bind-source-addr", [], Str, "", true, REPL),
    p!("bio_cpulist", [], Str, "", false, "kvik's background work is RocksDB's threads"),
    p!("cluster-allow-pubsubshard-when-down", [], Bool, "yes", true, CLUSTER_BUS),
    p!("cluster-allow-reads-when-down", [], Bool, "no", true, CLUSTER_BUS),
    p!("cluster-allow-replica-migration", [], Bool, "yes", true, CLUSTER_BUS),
    p!("cluster-announce-bus-port", [], Int(0, 65535), "0", true, CLUSTER_BUS),
    p!("cluster-announce-hostname", [], Hostname, "", true, CLUSTER_BUS),
    p!("cluster-announce-ip", [], Str, "", true, CLUSTER_BUS),
    p!("cluster-announce-port", [], Int(0, 65535), "0", true, CLUSTER_BUS),
    p!("cluster-announce-tls-port", [], Int(0, 65535), "0", true, CLUSTER_BUS),
    p!("cluster-config-file", [], Str, "nodes.conf", false, CLUSTER_BUS),
    p!("cluster-link-sendbuf-limit", [], Memory(0, U64), "0", true, CLUSTER_BUS),
    p!("cluster-migration-barrier", [], Int(0, I32), "1", true, CLUSTER_BUS),
    p!("cluster-node-timeout", [], Int(0, I64), "15000", true, CLUSTER_BUS),
    p!("cluster-port", [], Int(0, 65535), "0", false, CLUSTER_BUS),
    p!("cluster-replica-no-failover", ["cluster-slave-no-failover"], Bool, "no", true, CLUSTER_BUS),
    p!("cluster-replica-validity-factor", ["cluster-slave-validity-factor"], Int(0, I32), "10", true, CLUSTER_BUS),
    p!("crash-log-enabled", [], Bool, "yes", true, PROCESS),
    p!("crash-memcheck-enabled", [], Bool, "yes", true, PROCESS),
    p!("daemonize", [], Bool, "no", false, PROCESS),
    p!("dbfilename", [], Str, "dump.rdb", true, "names the checkpoint SAVE and BGSAVE write: <dir>/<dbfilename>.checkpoint, not an RDB file"),
    p!("disable-thp", [], Bool, "yes", false, PROCESS),
    p!("dynamic-hz", [], Bool, "yes", true, "kvik's timers run at hz"),
    p!("enable-debug-command", [], Enum(&["no", "yes", "local"]), "no", false, "read by DEBUG (cmd/debug.rs): off unless yes or local, as Redis"),
    p!("enable-module-command", [], Enum(&["no", "yes", "local"]), "no", false, "kvik has no modules"),
    p!("enable-protected-configs", [], Enum(&["no", "yes", "local"]), "no", false, "kvik has no protected configs"),
    p!("hash-max-listpack-entries", ["hash-max-ziplist-entries"], Int(0, I64), "512", true, ENCODING),
    p!("hash-max-listpack-value", ["hash-max-ziplist-value"], Memory(0, U64), "64", true, ENCODING),
    p!("hll-sparse-max-bytes", [], Memory(0, U64), "3000", true, HLL_SPARSE),
    p!("ignore-warnings", [], Str, "", true, PROCESS),
    p!("io-threads-do-reads", [], Bool, "no", false, ALWAYS),
    p!("latency-monitor-threshold", [], Int(0, I64), "0", true, "read by the latency monitor (stats/latency.rs)"),
    p!("latency-tracking", [], Bool, "yes", true, "read by the latency histograms (stats/latency.rs)"),
    p!("latency-tracking-info-percentiles", [], Percentiles, "50 99 99.9", true, "read by INFO latencystats"),
    p!("lazyfree-lazy-eviction", [], Bool, "no", true, LAZYFREE),
    p!("lazyfree-lazy-expire", [], Bool, "no", true, LAZYFREE),
    p!("lazyfree-lazy-server-del", [], Bool, "no", true, LAZYFREE),
    p!("lazyfree-lazy-user-del", [], Bool, "no", true, LAZYFREE),
    p!("lazyfree-lazy-user-flush", [], Bool, "no", true, LAZYFREE),
    p!("lfu-decay-time", [], Int(0, I32), "1", true, EVICTION),
    p!("lfu-log-factor", [], Int(0, I32), "10", true, EVICTION),
    p!("list-compress-depth", [], Int(0, I32), "0", true, "RocksDB compresses list elements with its block compression"),
    p!("list-max-listpack-size", ["list-max-ziplist-size"], Int(i32::MIN as i64, I32), "-2", true, ENCODING),
    p!("masteruser", [], Str, "", true, REPL),
    p!("maxmemory-clients", [], MemoryOrPercent, "0", true, EVICTION),
    p!("maxmemory-eviction-tenacity", [], Int(0, 100), "10", true, EVICTION),
    p!("maxmemory-policy", [], Enum(MAXMEMORY_POLICIES), "noeviction", true, EVICTION),
    p!("maxmemory-samples", [], Int(1, 64), "5", true, EVICTION),
    p!("no-appendfsync-on-rewrite", [], Bool, "no", true, AOF),
    p!("oom-score-adj", [], Enum(&["no", "yes", "relative", "absolute"]), "no", true, PROCESS),
    p!("oom-score-adj-values", [], Ints(3, -2000, 2000), "0 200 800", true, PROCESS),
    p!("pidfile", [], Str, "", false, PROCESS),
    p!("proc-title-template", [], Str, "{title} {listen-addr} {server-mode}", true, PROCESS),
    p!("propagation-error-behavior", [], Enum(&["ignore", "panic", "panic-on-replicas"]), "ignore", true, REPL),
    p!("protected-mode", [], Bool, "yes", true, IN_EFFECT),
    p!("rdb-del-sync-files", [], Bool, "no", true, RDB),
    p!("rdb-save-incremental-fsync", [], Bool, "yes", true, RDB),
    p!("rdbchecksum", [], Bool, "yes", false, RDB),
    p!("rdbcompression", [], Bool, "yes", true, RDB),
    p!("repl-backlog-ttl", [], Int(0, I32), "3600", true, REPL),
    p!("repl-disable-tcp-nodelay", [], Bool, "no", true, REPL),
    p!("repl-diskless-load", [], Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled", true, REPL),
    p!("repl-diskless-sync", [], Bool, "yes", true, REPL),
    p!("repl-diskless-sync-delay", [], Int(0, I32), "5", true, REPL),
    p!("repl-diskless-sync-max-replicas", [], Int(0, I32), "0", true, REPL),
    p!("repl-ping-replica-period", ["repl-ping-slave-period"], Int(1, I32), "10", true, REPL),
    p!("repl-timeout", [], Int(1, I32), "60", true, REPL),
    p!("replica-announce-ip", ["slave-announce-ip"], Str, "", true, REPL),
    p!("replica-announce-port", ["slave-announce-port"], Int(0, 65535), "0", true, REPL),
    p!("replica-announced", [], Bool, "yes", true, REPL),
    p!("replica-ignore-disk-write-errors", [], Bool, "no", true, REPL),
    p!("replica-ignore-maxmemory", ["slave-ignore-maxmemory"], Bool, "yes", true, REPL),
    p!("replica-lazy-flush", ["slave-lazy-flush"], Bool, "no", true, REPL),
    p!("replica-priority", ["slave-priority"], Int(0, I32), "100", true, REPL),
    p!("replica-serve-stale-data", ["slave-serve-stale-data"], Bool, "yes", true, REPL),
    p!("sanitize-dump-payload", [], Enum(&["no", "yes", "clients"]), "no", true, "kvik's RESTORE always validates the payload"),
    p!("save", [], Save, "3600 1 300 100 60 10000", true, RDB),
    p!("server_cpulist", [], Str, "", false, PROCESS),
    p!("set-max-intset-entries", [], Int(0, I64), "512", true, ENCODING),
    p!("set-proc-title", [], Bool, "yes", false, PROCESS),
    p!("shutdown-on-sigint", [], Enum(SHUTDOWN_FLAGS), "default", true, PROCESS),
    p!("shutdown-on-sigterm", [], Enum(SHUTDOWN_FLAGS), "default", true, PROCESS),
    p!("shutdown-timeout", [], Int(0, I32), "10", true, REPL),
    p!("socket-mark-id", [], Int(0, u32::MAX as i64), "0", false, PROCESS),
    p!("stop-writes-on-bgsave-error", [], Bool, "yes", true, RDB),
    p!("stream-node-max-bytes", [], Memory(0, U64), "4096", true, STREAM_NODES),
    p!("stream-node-max-entries", [], Int(0, I64), "100", true, STREAM_NODES),
    p!("supervised", [], Enum(&["upstart", "systemd", "auto", "no"]), "no", false, PROCESS),
    p!("syslog-enabled", [], Bool, "no", false, PROCESS),
    p!("syslog-facility", [], Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), "local0", false, PROCESS),
    p!("syslog-ident", [], Str, "redis", false, PROCESS),
    p!("tcp-backlog", [], Int(0, I32), "511", false, "kvik's listener uses a fixed backlog"),
    p!("tcp-keepalive", [], Int(0, I32), "300", true, "kvik leaves TCP keepalive to the operating system"),
    p!("tls-auth-clients", [], Enum(&["no", "yes", "optional"]), "yes", true, TLS),
    p!("tls-ca-cert-dir", [], Str, "", true, TLS),
    p!("tls-ca-cert-file", [], Str, "", true, TLS),
    p!("tls-cert-file", [], Str, "", true, TLS),
    p!("tls-ciphers", [], Str, "", true, TLS),
    p!("tls-ciphersuites", [], Str, "", true, TLS),
    p!("tls-client-cert-file", [], Str, "", true, TLS),
    p!("tls-client-key-file", [], Str, "", true, TLS),
    p!("tls-client-key-file-pass", [], Str, "", true, TLS),
    p!("tls-cluster", [], Bool, "no", true, TLS),
    p!("tls-dh-params-file", [], Str, "", true, TLS),
    p!("tls-key-file", [], Str, "", true, TLS),
    p!("tls-key-file-pass", [], Str, "", true, TLS),
    p!("tls-port", [], Int(0, 65535), "0", true, TLS),
    p!("tls-prefer-server-ciphers", [], Bool, "no", true, TLS),
    p!("tls-protocols", [], Str, "", true, TLS),
    p!("tls-replication", [], Bool, "no", true, TLS),
    p!("tls-session-cache-size", [], Int(0, I32), "20480", true, TLS),
    p!("tls-session-cache-timeout", [], Int(0, I32), "300", true, TLS),
    p!("tls-session-caching", [], Bool, "yes", true, TLS),
    p!("tracking-table-max-keys", [], Int(0, I64), "1000000", true, TRACKING),
    p!("unixsocket", [], Str, "", false, "kvik listens on TCP only"),
    p!("unixsocketperm", [], Octal, "0", false, "kvik listens on TCP only"),
    p!("zset-max-listpack-entries", ["zset-max-ziplist-entries"], Int(0, I64), "128", true, ENCODING),
    p!("zset-max-listpack-value", ["zset-max-ziplist-value"], Memory(0, U64), "64", true, ENCODING),
];

fn parse_int(v: &str) -> Result<i64, String> {
    v.parse::<i64>()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn in_range<T: PartialOrd + std::fmt::Display>(n: T, min: T, max: T) -> Result<T, String> {
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

impl Kind {
    /// Checks `v` and returns it in Redis's canonical form (what CONFIG GET shows).
    pub fn canonical(self, v: &str) -> Result<String, String> {
        match self {
            Bool => Ok(if parse_bool(v)? { "yes" } else { "no" }.into()),
            Int(min, max) => Ok(in_range(parse_int(v)?, min, max)?.to_string()),
            Memory(min, max) => Ok(in_range(parse_memory(v)?, min, max)?.to_string()),
            MemoryOrPercent => match v.strip_suffix('%') {
                Some(p) => match p.parse::<u64>() {
                    Ok(n) => Ok(format!("{n}%")),
                    Err(_) => Err("argument must be a memory or percent value".into()),
                },
                None => parse_memory(v)
                    .map(|n| n.to_string())
                    .map_err(|_| "argument must be a memory or percent value".into()),
            },
            Enum(words) => words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(v))
                .map(|w| w.to_string())
                .ok_or_else(|| {
                    format!(
                        "argument(s) must be one of the following: {}",
                        words.join(", ")
                    )
                }),
            Str => Ok(v.to_string()),
            Save => {
                let words: Vec<&str> = v.split_whitespace().collect();
                let valid =
                    words.len().is_multiple_of(2) && words.iter().all(|w| w.parse::<u32>().is_ok());
                if !valid {
                    return Err("Invalid save parameters".into());
                }
                Ok(words
                    .iter()
                    .map(|w| w.parse::<u32>().unwrap_or(0).to_string())
                    .collect::<Vec<_>>()
                    .join(" "))
            }
            Ints(n, min, max) => {
                let words: Vec<&str> = v.split_whitespace().collect();
                if words.len() != n {
                    return Err("wrong number of arguments".into());
                }
                let nums = words
                    .iter()
                    .map(|w| in_range(parse_int(w)?, min, max))
                    .collect::<Result<Vec<i64>, String>>()?;
                Ok(nums
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" "))
            }
            Percentiles => {
                let nums = v
                    .split_whitespace()
                    .map(|w| match w.parse::<f64>() {
                        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p.to_string()),
                        _ => {
                            Err("Invalid latency-tracking-info-percentiles parameters".to_string())
                        }
                    })
                    .collect::<Result<Vec<String>, String>>()?;
                Ok(nums.join(" "))
            }
            Octal => match u32::from_str_radix(v, 8) {
                Ok(n) if n <= 0o777 => Ok(format!("{n:o}")),
                _ => Err("argument couldn't be parsed into an integer".into()),
            },
            Hostname => {
                if v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                {
                    Ok(v.to_string())
                } else {
                    Err(
                        "Hostnames may only contain alphanumeric characters, hyphens or dots"
                            .into(),
                    )
                }
            }
        }
    }

    /// A value of this kind that is valid and, where possible, not the default (for tests).
    pub fn sample(self) -> &'static str {
        match self {
            Bool => "no",
            Int(min, _) if min > 7 => "100",
            Int(_, max) if max < 7 => "0",
            Int(..) => "7",
            Memory(min, _) if min > 1024 => "2gb",
            Memory(..) => "1kb",
            MemoryOrPercent => "5%",
            Enum(words) => words[words.len() - 1],
            Str => "some value",
            Save => "900 1",
            Ints(..) => "1 2 3",
            Percentiles => "50 90",
            Octal => "700",
            Hostname => "host-1.example",
        }
    }

    /// A value this kind refuses, if there is one.
    pub fn invalid(self) -> Option<&'static str> {
        match self {
            Str => None,
            _ => Some("not~valid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_canonical_and_samples_valid() {
        let mut names = std::collections::HashSet::new();
        for p in REDIS_PARAMS {
            assert_eq!(
                p.kind.canonical(p.default).as_deref(),
                Ok(p.default),
                "{}",
                p.name
            );
            assert!(p.kind.canonical(p.kind.sample()).is_ok(), "{}", p.name);
            if let Some(bad) = p.kind.invalid() {
                assert!(p.kind.canonical(bad).is_err(), "{}", p.name);
            }
            for n in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
                assert!(names.insert(n), "{n} twice");
            }
        }
    }

    #[test]
    fn compatibility_doc_lists_every_parameter() {
        let doc = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/compatibility.md"
        ));
        for p in REDIS_PARAMS {
            for n in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
                assert!(
                    doc.contains(&format!("`{n}`")),
                    "docs/compatibility.md lacks {n}"
                );
            }
        }
    }

    #[test]
    fn values_take_redis_canonical_form() {
        assert_eq!(Memory(0, U64).canonical("1kb").as_deref(), Ok("1024"));
        assert_eq!(Bool.canonical("YES").as_deref(), Ok("yes"));
        assert_eq!(
            Enum(MAXMEMORY_POLICIES).canonical("AllKeys-LRU").as_deref(),
            Ok("allkeys-lru")
        );
        assert_eq!(MemoryOrPercent.canonical("10%").as_deref(), Ok("10%"));
        assert_eq!(MemoryOrPercent.canonical("1mb").as_deref(), Ok("1048576"));
        assert!(Int(1, 64)
            .canonical("65")
            .unwrap_err()
            .contains("between 1 and 64"));
    }
}

//! Differential testing: random command sequences run against kvik and a real redis-server
//! (Debian's package, started here on another port); every reply and the final dataset must be
//! the same.
//!
//! Sequences are drawn from a table of command templates over a small key space, so keys are
//! often of the wrong type, missing, or emptied; members, scores and counts include the edge values
//! (negative counts, inf, NaN, exclusive ranges, huge integers). Some sequences speak RESP3, some
//! wrap commands in MULTI/EXEC (with queueing errors and WATCH), some turn client tracking on
//! and off (in RESP2 only: the moment Redis flushes a BCAST push to its own writer depends on
//! its event loop, so RESP3 sequences would compare timing; tests/it/tracking.rs compares the
//! pushes in a scenario instead).
//!
//! Replies are compared as parsed frames, byte for byte, except where Redis's order is a hash-table
//! accident (SMEMBERS, HGETALL ...: sorted first) or random (HRANDFIELD ...: lengths only), and TTLs
//! (compared by sign). `KVIK_DIFF_SEED=<n>` replays one sequence; `KVIK_DIFF_SEQUENCES=<n>` runs more
//! (default: a bounded number that keeps `make test` fast). A failure prints the seed and the
//! commands that led to the difference.

use super::common::*;
use kvik_resp::{parse_frame, Frame, Limits};
use kvik_testkit::{resp_request, RedisServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const DEFAULT_SEQUENCES: u64 = 60;
const COMMANDS_PER_SEQUENCE: usize = 120;

/// The key space: few keys, so types collide and commands meet each other's data. `z0` is kept
/// for lexicographic sorted-set commands (all its scores are 0, the only case Redis defines).
const KEYS: &[&str] = &["a", "b", "c", "{t}d"];
const FIELDS: &[&str] = &["f1", "f2", "f3", "1", "2", "x"];
const VALUES: &[&str] = &[
    "v1",
    "v2",
    "1",
    "-2",
    "10",
    "3.5",
    "",
    "abc",
    "9223372036854775807",
];
const INTS: &[&str] = &["-5", "-2", "-1", "0", "1", "2", "3", "10", "abc"];
const COUNTS: &[&str] = &["-3", "-1", "0", "1", "2", "5", "100"];
const SCORES: &[&str] = &[
    "0", "1", "2", "-1", "1.5", "inf", "-inf", "+inf", "1e3", "0.1",
];
const BAD_SCORES: &[&str] = &["nan", "abc", ""];
const RANGES: &[&str] = &["-inf", "+inf", "0", "1", "(1", "2", "(2.5", "-1", "(inf"];
const LEX: &[&str] = &["-", "+", "[f1", "(f2", "[f3", "[x", "(1", "f1"];
const INCRS: &[&str] = &["1", "-1.5", "0.1", "1e2", "abc", "inf"];
const TIMEOUTS: &[&str] = &["0.01", "0.02"];

/// Command templates. Tokens: K key, F field/member, V value, I index, C count, S score, R score
/// range item, X lex item, D float increment, T small timeout, F+ / V+ / K+ / FV+ / SF+ one to
/// three of them (SF: score-member pairs), ?WORD an optional literal, a|b|c one of the words;
/// anything else is literal.
const TEMPLATES: &[&str] = &[
    // strings and keys
    "SET K V",
    "SET K V EX 100",
    "GET K",
    "INCR K",
    "APPEND K V",
    "DEL K+",
    "EXISTS K+",
    "TYPE K",
    "EXPIRE K 100",
    "EXPIRE K 0",
    "PERSIST K",
    "TTL K",
    "RENAME K K",
    "RENAMENX K K",
    "COPY K K ?REPLACE",
    "OBJECT ENCODING K",
    "DBSIZE",
    // databases: SWAPDB is O(1) in kvik (a table of on-disk databases), MOVE and COPY ... DB
    // go through it; the final dataset is read in whatever database 0 now holds
    "SWAPDB 0|1|2 0|1|2",
    "SWAPDB 0 abc|99|-1",
    "MOVE K 1|2",
    "COPY K K DB 1|2 ?REPLACE",
    // server-admin commands whose replies do not depend on timing: errors and empty answers
    "OBJECT FREQ K",
    "MEMORY USAGE K SAMPLES -1|abc",
    "DEBUG SLEEP 0",
    "LATENCY HISTORY command",
    // client tracking on this connection (RESP2 sequences only, see `run_sequence`)
    "CLIENT TRACKING on",
    "CLIENT TRACKING off",
    "CLIENT TRACKING on BCAST",
    "CLIENT TRACKING on BCAST PREFIX a PREFIX {t}",
    "CLIENT TRACKING on OPTIN",
    "CLIENT TRACKING on OPTOUT",
    "CLIENT CACHING yes",
    "CLIENT CACHING no",
    "CLIENT TRACKINGINFO",
    "CLIENT GETREDIR",
    // hashes
    "HSET K FV+",
    "HSETNX K F V",
    "HGET K F",
    "HMGET K F+",
    "HMSET K FV+",
    "HGETALL K",
    "HDEL K F+",
    "HLEN K",
    "HSTRLEN K F",
    "HEXISTS K F",
    "HKEYS K",
    "HVALS K",
    "HINCRBY K F I",
    // Its own field: f64 and Redis's long double disagree past 2^53 (docs/compatibility.md).
    "HINCRBYFLOAT K fl D",
    "HRANDFIELD K",
    "HRANDFIELD K C",
    "HRANDFIELD K C WITHVALUES",
    "HSCAN K 0 COUNT 1000",
    // lists
    "LPUSH K V+",
    "RPUSH K V+",
    "LPUSHX K V+",
    "RPUSHX K V+",
    "LPOP K",
    "RPOP K",
    "LPOP K C",
    "RPOP K C",
    "LLEN K",
    "LINDEX K I",
    "LSET K I V",
    "LINSERT K before|after V V",
    "LRANGE K I I",
    "LREM K I V",
    "LTRIM K I I",
    "LPOS K V",
    "LPOS K V RANK I COUNT C MAXLEN C",
    "LMOVE K K left|right left|right",
    "RPOPLPUSH K K",
    "LMPOP 2 K K left|right",
    "LMPOP 1 K right COUNT C",
    "BLPOP K K T",
    "BRPOP K T",
    "BLMOVE K K left|right left|right T",
    "BLMPOP T 1 K left COUNT C",
    // sets
    "SADD K F+",
    "SREM K F+",
    "SMEMBERS K",
    "SISMEMBER K F",
    "SMISMEMBER K F+",
    "SCARD K",
    "SMOVE K K F",
    "SINTER K+",
    "SINTERCARD 2 K K",
    "SINTERCARD 2 K K LIMIT C",
    "SINTERSTORE K K+",
    "SUNION K+",
    "SUNIONSTORE K K+",
    "SDIFF K+",
    "SDIFFSTORE K K+",
    "SSCAN K 0 COUNT 1000",
    "SRANDMEMBER K",
    "SRANDMEMBER K C",
    // sorted sets
    "ZADD K SF+",
    "ZADD K nx|xx SF+",
    "ZADD K gt|lt ?CH SF+",
    "ZADD K INCR S F",
    "ZADD K BADSCORE F",
    "ZINCRBY K D F",
    "ZREM K F+",
    "ZCARD K",
    "ZCOUNT K R R",
    "ZSCORE K F",
    "ZMSCORE K F+",
    "ZRANK K F",
    "ZREVRANK K F",
    "ZRANGE K I I ?WITHSCORES",
    "ZRANGE K R R BYSCORE ?REV ?WITHSCORES",
    "ZRANGE K R R BYSCORE LIMIT I C",
    "ZRANGEBYSCORE K R R ?WITHSCORES",
    "ZREVRANGEBYSCORE K R R ?WITHSCORES",
    "ZREVRANGE K I I ?WITHSCORES",
    "ZRANGESTORE K K I I",
    "ZREMRANGEBYRANK K I I",
    "ZREMRANGEBYSCORE K R R",
    "ZPOPMIN K",
    "ZPOPMAX K C",
    "ZMPOP 2 K K min|max",
    "ZMPOP 1 K max COUNT C",
    "BZPOPMIN K T",
    "BZPOPMAX K K T",
    "BZMPOP T 1 K min COUNT C",
    "ZUNION 2 K K ?WITHSCORES",
    "ZINTER 2 K K WEIGHTS 1 2 AGGREGATE sum|min|max ?WITHSCORES",
    "ZDIFF 2 K K ?WITHSCORES",
    "ZUNIONSTORE K 2 K K",
    "ZINTERSTORE K 2 K K AGGREGATE max",
    "ZDIFFSTORE K 2 K K",
    "ZINTERCARD 2 K K",
    "ZINTERCARD 2 K K LIMIT C",
    "ZINTER 3 K K K WEIGHTS 2 1 -1 ?WITHSCORES",
    "ZDIFF 3 K K K",
    "ZSCAN K 0 COUNT 1000",
    "ZRANDMEMBER K C",
    // lexicographic ranges: on z0 only, where every score is 0
    "ZADD z0 0 F",
    "ZREM z0 F",
    "ZLEXCOUNT z0 X X",
    "ZRANGE z0 X X BYLEX",
    "ZRANGEBYLEX z0 X X",
    "ZREVRANGEBYLEX z0 X X",
    "ZREMRANGEBYLEX z0 X X",
    // pub/sub without subscribers on these connections: receivers and introspection
    "PUBLISH K V",
    "SPUBLISH K V",
    "PUBSUB NUMSUB K+",
    "PUBSUB NUMPAT",
    "PUBSUB CHANNELS",
    "PUBSUB SHARDNUMSUB K",
    // SORT and SORT_RO (cmd/sort.rs), on their own keys l1 and l2: Redis's SORT turns a small
    // sorted set's encoding into a skiplist, which OBJECT ENCODING of the main keys would show.
    // Their elements are often the main keys' names, so BY / GET patterns find those keys (`*`:
    // a string, `*->F`: a hash field). No ALPHA with a BY pattern: equal weights leave Redis's
    // order to its unstable quicksort. BY nosort reads a set in Redis's hash order unless the
    // result is STOREd (then Redis sorts it), so nosort always STOREs.
    "RPUSH l1|l2 a b c {t}d",
    "RPUSH l1|l2 V+",
    "SADD l1|l2 a b c",
    "ZADD l1|l2 SF+",
    "DEL l1|l2",
    "SORT l1|l2 ?DESC ?ALPHA",
    "SORT_RO l1|l2 LIMIT I C ?DESC",
    "SORT l1|l2 ALPHA LIMIT I C STORE K",
    "SORT l1|l2 BY * ?DESC GET # GET *",
    "SORT l1|l2 BY *->F LIMIT I C GET *->F",
    "SORT l1|l2 BY nosort ?DESC LIMIT I C STORE l1|l2",
    "SORT l1|l2 GET * STORE K",
    "SORT_RO l1|l2 STORE K",
    // ---- bitmaps, HyperLogLog and geo (engineer "bits"; one block, merge as a unit) ----
    // Bitmaps and HLLs are strings: they run on the shared keys, so they meet plain strings,
    // other types and each other (an APPEND to an HLL makes it corrupt or foreign).
    "SETBIT K 0|1|7|8|100|4095|-1|abc 0|1|2",
    // Past 16 KiB kvik stores the string in segments: every string command must still agree.
    "SETBIT K 140000|200000|131072 0|1",
    "BITFIELD K SET u8 #20000 255 GET u16 #9999",
    "GETBIT K 0|1|7|100|-1|abc",
    "BITCOUNT K",
    "BITCOUNT K I I",
    "BITCOUNT K I I BYTE|BIT|bad",
    "BITCOUNT K I",
    "BITPOS K 0|1|2",
    "BITPOS K 0|1 I",
    "BITPOS K 0|1 I I BYTE|BIT|bad",
    "BITOP and|or|xor|AND K K+",
    "BITOP not K K",
    "BITOP not K K K",
    "BITOP nand K K",
    "BITFIELD K GET u8|i5|u63|i64|u64|x8 0|3|#1|-1|100",
    "BITFIELD K SET i8|u4|i64 0|#2|13 I GET u8 0",
    "BITFIELD K OVERFLOW wrap|sat|bad INCRBY u8|i8|u2 0|#1 I",
    // FAIL after a SET: a BITFIELD that creates its key and changes nothing does not touch a
    // WATCH in Redis, and does in kvik (docs/compatibility.md).
    "BITFIELD K SET u8 0 200 OVERFLOW fail INCRBY u8|u2 0|#1 I",
    "BITFIELD K INCRBY i16 0 I OVERFLOW fail INCRBY u1 3 1",
    "BITFIELD K",
    "BITFIELD_RO K GET u8|i8 0|#3",
    "BITFIELD_RO K SET u8 0 1",
    "PFADD K F+",
    "PFADD K",
    "PFCOUNT K+",
    "PFMERGE K K+",
    "PFDEBUG encoding|decode|todense|getreg|bad K",
    // Geo reads run on their own keys g1 and g2: a sorted set written by ZADD with scores like
    // -1 or inf has no position (C's double to uint64 cast is undefined there).
    "GEOADD g1|g2 13.361389|15.087269|13.5|14.2|181|abc 38.115556|37.502669|38.2|37.9|-86 F",
    "GEOADD g1|g2 nx|xx|ch|CH 13.36|15.08|13.7 38.11|37.5|38.0 F 14.0|15.5 37.2|38.1 F",
    "GEOADD g1|g2 nx xx 13 38 F",
    "GEOADD g1|g2 ch 13 38",
    "GEOADD K 13.5 38.2 F",
    "ZADD g1|g2 0|1|100 F",
    "SET g1|g2 V",
    "DEL g1|g2",
    "GEOPOS g1|g2 F+",
    "GEOPOS K",
    "GEODIST g1|g2 F F",
    "GEODIST g1|g2 F F m|km|ft|mi|yd|KM",
    "GEODIST g1|g2 F F km x",
    "GEOHASH g1|g2 F+",
    "GEOHASH K",
    "GEOSEARCH g1|g2 FROMMEMBER F BYRADIUS 0|10|100|200|-1|abc km|m|mi|yd ?ASC ?WITHDIST ?WITHCOORD ?WITHHASH",
    "GEOSEARCH g1|g2 FROMLONLAT 13.5|15|200 38|37.5 BYBOX 100|400|-1|x 200|300 km|ft ?DESC ?WITHDIST",
    "GEOSEARCH g1|g2 FROMLONLAT 14 38 BYRADIUS 300 km COUNT C ?ANY ?WITHDIST",
    "GEOSEARCH g1|g2 FROMLONLAT 14 38 BYRADIUS 300 km ANY",
    "GEOSEARCH g1|g2 FROMMEMBER F FROMLONLAT 14 38 BYRADIUS 10 km",
    "GEOSEARCH g1|g2 BYRADIUS 10 km ASC",
    "GEOSEARCH g1|g2 FROMLONLAT 14 38 ASC WITHDIST",
    "GEOSEARCH g1|g2 FROMLONLAT 14 38 BYRADIUS 300 km STORE K",
    "GEOSEARCH K FROMLONLAT 14 38 BYRADIUS 300 km",
    "GEOSEARCHSTORE g1|g2|K g1|g2 FROMLONLAT 14 38 BYRADIUS 200|300 km ?STOREDIST ?WITHDIST",
    "GEOSEARCHSTORE K g1|g2 FROMMEMBER F BYBOX 300 300 km COUNT 1|2 ?DESC",
    "GEORADIUS g1|g2 14 38 200|300 km ?WITHDIST ?WITHHASH ?ASC COUNT 2|5|0",
    "GEORADIUS g1|g2 14 38 300 km STORE|STOREDIST g1|g2|K",
    "GEORADIUS g1|g2 14 38 300 km STORE K WITHDIST",
    "GEORADIUS_RO g1|g2 14|200 38 300 km ?WITHCOORD ?DESC",
    "GEORADIUS_RO g1|g2 14 38 300 km STORE K",
    "GEORADIUSBYMEMBER g1|g2 F 200|0|-5 km|yd ?WITHDIST ?ASC",
    "GEORADIUSBYMEMBER g1|g2 F 300 km STOREDIST K",
    "GEORADIUSBYMEMBER_RO g1|g2 F 300 km COUNT 1|2 ?ANY",
    // ---- end of the bitmaps, HyperLogLog and geo block ----
    // transactions (MULTI/EXEC/DISCARD are also injected around runs of commands)
    "WATCH K",
    "UNWATCH",
    // ---- streams (tokens XA XS XS+ XR XD XG XC, see STREAM_* below): explicit IDs only, so
    // replies are deterministic; no reply with idle or delivery times ----
    "XADD K XA FV+",
    "XADD K NOMKSTREAM XA F V",
    "XADD K MAXLEN ?= C XA F V",
    "XADD K MAXLEN ~ C XA F V",
    "XADD K MINID XS XA F V",
    "XLEN K",
    "XRANGE K XR XR",
    "XRANGE K XR XR COUNT C",
    "XREVRANGE K XR XR COUNT C",
    "XDEL K XS+",
    "XTRIM K MAXLEN ?= C",
    "XTRIM K MINID ?~ XS",
    "XSETID K XS",
    "XREAD STREAMS K XD",
    "XREAD COUNT C STREAMS K K XD XD",
    "XREAD BLOCK 10 STREAMS K XD",
    "XGROUP CREATE K XG XD ?MKSTREAM",
    "XGROUP SETID K XG XD",
    "XGROUP DESTROY K XG",
    "XGROUP CREATECONSUMER K XG XC",
    "XGROUP DELCONSUMER K XG XC",
    "XREADGROUP GROUP XG XC COUNT C STREAMS K >",
    "XREADGROUP GROUP XG XC ?NOACK STREAMS K >|0|XS",
    "XACK K XG XS+",
    "XPENDING K XG",
    "XCLAIM K XG XC 0 XS+ ?JUSTID",
    "XAUTOCLAIM K XG XC 0 XR COUNT C ?JUSTID",
    "XINFO GROUPS K",
    "XINFO STREAM K",
    "XSETID K XS ENTRIESADDED C ?MAXDELETEDID XS",
    "XGROUP CREATE K XG XD ENTRIESREAD C",
    "XGROUP SETID K XG XD ENTRIESREAD C",
    "XCLAIM K XG XC 0 XS ?FORCE RETRYCOUNT C",
    "XCLAIM K XG XC 0 XS LASTID XS",
    // ---- end of streams ----
];

/// Stream template tokens: XADD IDs (XA), strict IDs (XS, XS+), range bounds (XR), read IDs
/// with `$` (XD), group names (XG) and consumer names (XC).
const STREAM_ADD_IDS: &[&str] = &["1-1", "1-*", "2-*", "3", "5-5", "9-9", "0-0", "1-x"];
const STREAM_IDS: &[&str] = &["1-1", "1-2", "2", "3-0", "5-5", "0-1", "9-9", "1-x"];
const STREAM_BOUNDS: &[&str] = &["-", "+", "(1-1", "2", "(3", "5-5", "0", "(0-0"];
const STREAM_READ_IDS: &[&str] = &["0", "1-1", "3", "$", "9-9"];
const STREAM_GROUPS: &[&str] = &["g1", "g2"];
const STREAM_CONSUMERS: &[&str] = &["c1", "c2"];

/// Commands whose replies list members in an order Redis leaves unspecified: compared sorted.
const UNORDERED: &[&str] = &[
    "smembers", "sinter", "sunion", "sdiff", "hkeys", "hvals", "keys",
];
/// Commands whose replies are flat field/value (or member/score) pairs in unspecified order.
const UNORDERED_PAIRS: &[&str] = &["hgetall"];
/// Scans: [cursor, elements]; elements compared sorted (pairs for HSCAN/ZSCAN).
const SCANS: &[&str] = &["hscan", "sscan", "zscan"];
/// Random picks: only the reply's shape and length are compared.
const RANDOM: &[&str] = &["hrandfield", "srandmember", "zrandmember"];

/// A small deterministic generator (xorshift64*), so a seed replays exactly.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Expands one template into a command.
fn expand(template: &str, rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    for tok in template.split(' ') {
        let reps = 1 + rng.below(3);
        match tok {
            "K" => out.push(rng.pick(KEYS).to_string()),
            "F" => out.push(rng.pick(FIELDS).to_string()),
            "V" => out.push(rng.pick(VALUES).to_string()),
            "I" => out.push(rng.pick(INTS).to_string()),
            "C" => out.push(rng.pick(COUNTS).to_string()),
            "S" => out.push(rng.pick(SCORES).to_string()),
            "BADSCORE" => out.push(rng.pick(BAD_SCORES).to_string()),
            "R" => out.push(rng.pick(RANGES).to_string()),
            "X" => out.push(rng.pick(LEX).to_string()),
            "D" => out.push(rng.pick(INCRS).to_string()),
            "T" => out.push(rng.pick(TIMEOUTS).to_string()),
            "LUA" => out.extend(lua_command(rng)),
            "LUALIB" => out.push(LUA_LIBRARY.to_string()),
            "K+" => (0..reps).for_each(|_| out.push(rng.pick(KEYS).to_string())),
            "F+" => (0..reps).for_each(|_| out.push(rng.pick(FIELDS).to_string())),
            "V+" => (0..reps).for_each(|_| out.push(rng.pick(VALUES).to_string())),
            "FV+" => (0..reps).for_each(|_| {
                out.push(rng.pick(FIELDS).to_string());
                out.push(rng.pick(VALUES).to_string());
            }),
            "SF+" => (0..reps).for_each(|_| {
                out.push(rng.pick(SCORES).to_string());
                out.push(rng.pick(FIELDS).to_string());
            }),
            "XA" => out.push(rng.pick(STREAM_ADD_IDS).to_string()),
            "XS" => out.push(rng.pick(STREAM_IDS).to_string()),
            "XS+" => (0..reps).for_each(|_| out.push(rng.pick(STREAM_IDS).to_string())),
            "XR" => out.push(rng.pick(STREAM_BOUNDS).to_string()),
            "XD" => out.push(rng.pick(STREAM_READ_IDS).to_string()),
            "XG" => out.push(rng.pick(STREAM_GROUPS).to_string()),
            "XC" => out.push(rng.pick(STREAM_CONSUMERS).to_string()),
            t if t.starts_with('?') => {
                if rng.chance(50) {
                    out.push(t[1..].to_string());
                }
            }
            t if t.contains('|') => {
                let alts: Vec<&str> = t.split('|').collect();
                out.push(rng.pick(&alts).to_string());
            }
            t => out.push(t.to_string()),
        }
    }
    out
}

// ---- Scripting: EVAL / EVAL_RO / FCALL / FCALL_RO built from the templates above -------------
// (one block, with the `LUA` and `LUALIB` tokens in `expand` and the chain in `templates`.)

/// Templates drawn like the others: `LUA` becomes a whole script command wrapping one command
/// drawn from [`TEMPLATES`]; the library is (re)loaded now and then (FLUSHALL keeps functions,
/// and an FCALL before the first load fails alike on both servers).
const SCRIPT_TEMPLATES: &[&str] = &["LUA", "LUA", "LUA", "LUA", "FUNCTION LOAD REPLACE LUALIB"];

/// Script bodies: the wrapped command comes in ARGV, so no quoting is needed. Raised and
/// returned errors, a second command, RESP3 conversions, a read-only script.
const LUA_BODIES: &[&str] = &[
    "return redis.call(unpack(ARGV))",
    "return redis.pcall(unpack(ARGV))",
    "local r = redis.pcall(unpack(ARGV)) return {r, redis.call('exists', KEYS[1])}",
    "redis.setresp(3) return redis.call(unpack(ARGV))",
    "redis.setresp(3) local r = redis.pcall(unpack(ARGV)) return {type(r), r}",
    "local ok, e = pcall(redis.call, unpack(ARGV)) if ok then return {'ok', e} end return {'raised', type(e)}",
    "#!lua flags=no-writes\nreturn redis.call(unpack(ARGV))",
];

const LUA_LIBRARY: &str = "#!lua name=difflib\n\
    redis.register_function('lua_call', function(keys, args) return redis.call(unpack(args)) end)\n\
    redis.register_function('lua_pcall', function(keys, args) return redis.pcall(unpack(args)) end)\n\
    redis.register_function{function_name='lua_ro', callback=function(keys, args) return redis.call(unpack(args)) end, flags={'no-writes'}}";

/// Commands whose replies a script would pass through unnormalized (order, randomness, TTL
/// values, encodings): not wrapped.
fn scriptable(template: &str) -> bool {
    let name = template.split(' ').next().unwrap().to_ascii_lowercase();
    let n = name.as_str();
    !(UNORDERED.contains(&n)
        || UNORDERED_PAIRS.contains(&n)
        || SCANS.contains(&n)
        || RANDOM.contains(&n)
        || matches!(n, "object" | "ttl" | "pttl"))
}

/// One script command: EVAL / EVAL_RO of a body, or FCALL / FCALL_RO of the library, declaring
/// every key of the key space and wrapping one drawn command.
fn lua_command(rng: &mut Rng) -> Vec<String> {
    let scriptable: Vec<&str> = TEMPLATES
        .iter()
        .copied()
        .filter(|t| scriptable(t))
        .collect();
    let inner = expand(rng.pick(&scriptable), rng);
    let mut out: Vec<String> = match rng.below(10) {
        0..=5 => vec!["EVAL".into(), rng.pick(LUA_BODIES).into()],
        6 => vec!["EVAL_RO".into(), rng.pick(LUA_BODIES).into()],
        7 => vec!["FCALL".into(), "lua_call".into()],
        8 => vec!["FCALL".into(), "lua_pcall".into()],
        _ => vec!["FCALL_RO".into(), "lua_ro".into()],
    };
    out.push(KEYS.len().to_string());
    out.extend(KEYS.iter().map(|k| k.to_string()));
    out.extend(inner);
    out
}

/// One connection speaking raw RESP, so replies (errors included) are compared exactly.
struct Peer {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Peer {
    fn connect(port: u16) -> Peer {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Peer {
            stream,
            buf: Vec::new(),
        }
    }

    fn call(&mut self, args: &[String]) -> Frame {
        let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&resp_request(&parts)).unwrap();
        let limits = Limits::default();
        loop {
            if let Some((frame, used)) = parse_frame(&self.buf, &limits).expect("valid RESP") {
                self.buf.drain(..used);
                return frame;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).expect("reply within 20 s");
            assert!(n > 0, "server closed the connection after {args:?}");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Sorts the elements of an unordered reply; `pairs` keeps field/value pairs together.
fn sorted(frame: Frame, pairs: bool) -> Frame {
    let key = |f: &Frame| format!("{f:?}");
    match frame {
        Frame::Array(items) | Frame::Set(items) if pairs => {
            let mut chunks: Vec<Vec<Frame>> = items.chunks(2).map(|c| c.to_vec()).collect();
            chunks.sort_by_key(|c| format!("{c:?}"));
            Frame::Array(chunks.into_iter().flatten().collect())
        }
        Frame::Array(mut items) | Frame::Set(mut items) => {
            items.sort_by_key(key);
            Frame::Array(items)
        }
        Frame::Map(mut pairs) => {
            pairs.sort_by_key(|(k, v)| (key(k), key(v)));
            Frame::Map(pairs)
        }
        other => other,
    }
}

/// The reply in a form where only what Redis defines is left to compare.
fn normalize(args: &[String], frame: Frame) -> Frame {
    let name = args[0].to_ascii_lowercase();
    let name = name.as_str();
    if matches!(frame, Frame::Error(_)) {
        return frame;
    }
    if UNORDERED.contains(&name) {
        return sorted(frame, false);
    }
    if UNORDERED_PAIRS.contains(&name) {
        return sorted(frame, true);
    }
    if SCANS.contains(&name) {
        if let Frame::Array(mut parts) = frame {
            if parts.len() == 2 {
                let elems = parts.pop().unwrap();
                parts.push(sorted(elems, name != "sscan"));
            }
            return Frame::Array(parts);
        }
        return frame;
    }
    if RANDOM.contains(&name) {
        return match frame {
            Frame::Array(items) => Frame::Integer(items.len() as i64),
            Frame::Bulk(_) => Frame::Bulk(b"<one>".to_vec()),
            other => other,
        };
    }
    if name == "object" {
        // A string's encoding in Redis depends on its history (APPEND makes "raw" even of
        // digits); kvik derives it from the value alone (docs/compatibility.md).
        if let Frame::Bulk(b) = &frame {
            if b == b"raw" || b == b"embstr" || b == b"int" {
                return Frame::Bulk(b"string".to_vec());
            }
        }
    }
    if name == "ttl" || name == "pttl" {
        if let Frame::Integer(n) = frame {
            return Frame::Integer(n.signum());
        }
    }
    frame
}

/// Everything the database holds, per key, in a comparable form.
fn dataset(p: &mut Peer) -> Vec<(String, Frame, Frame)> {
    let cmd = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
    let Frame::Array(keys) = sorted(p.call(&cmd("KEYS *")), false) else {
        panic!("KEYS reply");
    };
    let mut out = Vec::new();
    for k in keys {
        let Frame::Bulk(k) = k else { continue };
        let k = String::from_utf8(k).unwrap();
        let ty = match p.call(&["TYPE".into(), k.clone()]) {
            Frame::Simple(t) => t,
            other => panic!("TYPE reply {other:?}"),
        };
        let read: Vec<String> = match ty.as_str() {
            "string" => vec!["GET".into(), k.clone()],
            "hash" => vec!["HGETALL".into(), k.clone()],
            "list" => vec!["LRANGE".into(), k.clone(), "0".into(), "-1".into()],
            "set" => vec!["SMEMBERS".into(), k.clone()],
            "zset" => vec![
                "ZRANGE".into(),
                k.clone(),
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
            "stream" => vec!["XRANGE".into(), k.clone(), "-".into(), "+".into()],
            other => panic!("unknown type {other}"),
        };
        let mut content = normalize(&read, p.call(&read));
        if ty == "stream" {
            // Groups too: their IDs, counters and pending counts (no times in this reply).
            let groups = p.call(&["XINFO".into(), "GROUPS".into(), k.clone()]);
            content = Frame::Array(vec![content, groups]);
        }
        let ttl = normalize(&cmd("TTL x"), p.call(&["TTL".into(), k.clone()]));
        out.push((format!("{k} ({ty})"), content, ttl));
    }
    out
}

/// Runs the sequence of `seed` on both servers; returns the first difference, if any.
/// One sequence of `seed`, of the templates of the commands `only` names (all if `None`).
fn run_sequence(
    seed: u64,
    kvik: &mut Peer,
    redis: &mut Peer,
    only: &Option<Vec<String>>,
) -> Result<(), String> {
    let templates = templates(only);
    let transactions = only
        .as_ref()
        .is_none_or(|only| only.iter().any(|c| c == "multi"));
    let mut rng = Rng::new(seed);
    for p in [&mut *kvik, &mut *redis] {
        p.call(&["CLIENT".into(), "TRACKING".into(), "off".into()]);
        p.call(&["FLUSHALL".into()]);
    }
    let resp3 = rng.chance(30);
    for p in [&mut *kvik, &mut *redis] {
        p.call(&["HELLO".into(), if resp3 { "3" } else { "2" }.into()]);
    }
    let mut history: Vec<String> = vec![format!("HELLO {}", if resp3 { 3 } else { 2 })];
    // Commands queued in the open MULTI, to normalize EXEC's replies one by one.
    let mut queued: Option<Vec<Vec<String>>> = None;
    for step in 0..COMMANDS_PER_SEQUENCE {
        let args: Vec<String> = match &queued {
            None if transactions && rng.chance(6) => vec!["MULTI".into()],
            Some(q) if !q.is_empty() && rng.chance(25) => {
                vec![if rng.chance(85) { "EXEC" } else { "DISCARD" }.into()]
            }
            Some(_) if rng.chance(3) => vec!["NOSUCHCOMMAND".into()],
            Some(_) if rng.chance(3) => vec!["GET".into()],
            _ => {
                let t = templates[rng.below(templates.len())];
                if resp3 && t.starts_with("CLIENT TRACKING on") {
                    vec!["CLIENT".into(), "TRACKINGINFO".into()]
                } else {
                    expand(t, &mut rng)
                }
            }
        };
        history.push(args.join(" "));
        let (a, b) = (kvik.call(&args), redis.call(&args));
        let name = args[0].to_ascii_lowercase();
        let (a, b) = match (name.as_str(), queued.take()) {
            ("multi", None) => {
                queued = Some(Vec::new());
                (a, b)
            }
            ("exec", Some(q)) => (normalize_exec(&q, a), normalize_exec(&q, b)),
            ("discard", Some(_)) => (a, b),
            (_, Some(mut q)) => {
                if b == Frame::Simple("QUEUED".into()) {
                    q.push(args.clone());
                }
                queued = Some(q);
                (a, b)
            }
            (_, None) => (normalize(&args, a), normalize(&args, b)),
        };
        if a != b {
            let tail = history[history.len().saturating_sub(12)..].join("\n  ");
            return Err(format!(
                "seed {seed}, step {step}: replies differ\n  kvik:  {a:?}\n  redis: {b:?}\nlast commands:\n  {tail}\nreplay: KVIK_DIFF_SEED={seed} cargo test --release -p kvik-server --test it differential"
            ));
        }
    }
    if queued.is_some() {
        for p in [&mut *kvik, &mut *redis] {
            p.call(&["DISCARD".into()]);
        }
    }
    let (a, b) = (dataset(kvik), dataset(redis));
    if a != b {
        return Err(format!(
            "seed {seed}: final datasets differ\n  kvik:  {a:?}\n  redis: {b:?}\nreplay: KVIK_DIFF_SEED={seed} cargo test --release -p kvik-server --test it differential"
        ));
    }
    Ok(())
}

fn normalize_exec(queued: &[Vec<String>], frame: Frame) -> Frame {
    match frame {
        Frame::Array(items) if items.len() == queued.len() => Frame::Array(
            items
                .into_iter()
                .zip(queued)
                .map(|(f, args)| normalize(args, f))
                .collect(),
        ),
        other => other,
    }
}

/// The templates to draw from: all, or those whose command is in `KVIK_DIFF_ONLY` (a
/// comma-separated list of command names), to chase one family's differences.
fn templates(only: &Option<Vec<String>>) -> Vec<&'static str> {
    TEMPLATES
        .iter()
        .chain(SCRIPT_TEMPLATES)
        .copied()
        .filter(|t| {
            let name = t.split(' ').next().unwrap().to_ascii_lowercase();
            only.as_ref().is_none_or(|o| o.contains(&name))
        })
        .collect()
}

/// `KVIK_DIFF_ONLY` as a list of lowercase command names; MULTI/EXEC are injected only when
/// it is unset or lists `multi`.
fn only_filter() -> Option<Vec<String>> {
    let only = std::env::var("KVIK_DIFF_ONLY").ok()?.to_ascii_lowercase();
    Some(
        only.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("KVIK_DIFF_SEED") {
        return vec![s.parse().expect("KVIK_DIFF_SEED is a number")];
    }
    let n = std::env::var("KVIK_DIFF_SEQUENCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEQUENCES);
    (1..=n).collect()
}

#[test]
fn random_sequences_match_redis() {
    sequences_match_redis(&[]);
}

/// The same sequences with hashes of more than two fields cached as their meta and their
/// fields one by one (`cache-big-hashes`), the path a hash of more than 512 takes by default.
#[test]
fn random_sequences_match_redis_with_hashes_cached_by_field() {
    sequences_match_redis(&["--cache-max-hash-fields", "2"]);
}

/// The same sequences with every sorted set counted through a rank index and its scores
/// (`zset-rank-index-min-len 1`): ranks, counts, rank ranges, far offsets and pops of small
/// sets take the paths a set of thousands of members takes by default.
#[test]
fn random_sequences_match_redis_with_every_sorted_set_rank_indexed() {
    // Sorted-set commands only (and transactions), so that most reads meet an index.
    let zsets = TEMPLATES
        .iter()
        .filter_map(|t| t.split(' ').next())
        .filter(|name| name.starts_with('Z') || name.starts_with("BZ") || *name == "MULTI")
        .map(str::to_ascii_lowercase)
        .chain(["multi".to_string()])
        .collect();
    let only = only_filter().or(Some(zsets));
    let server = sequences_match_redis_of(&["--zset-rank-index-min-len", "1"], &only);
    let mut c = server.client();
    let answers = info_field(&mut c, "stats", "zset_rank_index_answers").unwrap();
    let placed = info_field(&mut c, "stats", "zset_rank_index_placed").unwrap();
    eprintln!("answered through a rank index: {answers}, placed by the scores: {placed}");
    assert!(
        answers > 0 && placed > 0,
        "the sequences reach the rank index"
    );
}

fn sequences_match_redis(server_args: &[&str]) {
    sequences_match_redis_of(server_args, &only_filter());
}

/// Runs the sequences of the commands `only` names against kvik started with
/// `server_args` and a redis-server; returns the kvik server for a look at its counters.
fn sequences_match_redis_of(server_args: &[&str], only: &Option<Vec<String>>) -> TestServer {
    let server = TestServer::start_with(server_args);
    let redis = RedisServer::start(&[]);
    let mut kvik = Peer::connect(server.port);
    let mut real = Peer::connect(redis.port);
    let failures: Vec<String> = seeds()
        .into_iter()
        .filter_map(|seed| run_sequence(seed, &mut kvik, &mut real, only).err())
        .take(3)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every write read its keys under their locks (`storage::flush_gate`'s premise).
    let unlocked = crate::common::stat(&mut server.client(), "unlocked_write_lookups");
    assert_eq!(unlocked, 0, "writes that read a key without its lock");
    server
}

#[test]
fn the_harness_sees_a_difference() {
    // A harness that cannot fail proves nothing: a reply normalized wrongly or a dataset
    // dump that misses a key would hide every difference. Make one on purpose.
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut kvik = Peer::connect(server.port);
    let mut real = Peer::connect(redis.port);
    real.call(&["SET".into(), "only-in-redis".into(), "1".into()]);
    assert_ne!(dataset(&mut kvik), dataset(&mut real));
    let a = normalize(
        &["SMEMBERS".into()],
        Frame::Array(vec![Frame::Bulk(b"x".to_vec())]),
    );
    let b = normalize(
        &["SMEMBERS".into()],
        Frame::Array(vec![Frame::Bulk(b"y".to_vec())]),
    );
    assert_ne!(a, b);
}

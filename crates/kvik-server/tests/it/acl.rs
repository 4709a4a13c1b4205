//! ACL users against the real server: the same check on the I/O-thread (cache hit) path and the
//! pool path, key patterns, ACL LOG, ACL SAVE / LOAD with an ACL file, AUTH and HELLO AUTH,
//! MULTI/EXEC and scripts, and a randomized comparison with redis-server of which commands a
//! random user may run.

use super::common::*;
use kvik_testkit::{connect_raw, RedisServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::io::Write;
use std::time::Duration;

fn login(port: u16, user: &str, pass: &str) -> Connection {
    let mut con = kvik_testkit::connect(port);
    let _: () = q(&mut con, &["AUTH", user, pass]);
    con
}

const NO_SET: &str = "NOPERM this user has no permissions to run the 'set' command";
const NO_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

#[test]
fn user_allowed_get_but_not_set_on_cache_hit_and_miss() {
    let server = TestServer::start();
    let mut admin = kvik_testkit::connect(server.port);
    let _: () = q(&mut admin, &["SET", "k", "v"]);
    let _: Option<String> = q(&mut admin, &["GET", "k"]); // warms the hot cache
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "reader", "on", ">pw", "+get", "~*"],
    );

    let mut reader = login(server.port, "reader", "pw");
    // A cache hit, answered on the I/O thread.
    let before = rtc_commands(&mut admin);
    let v: String = q(&mut reader, &["GET", "k"]);
    assert_eq!(v, "v");
    assert!(
        rtc_commands(&mut admin) > before,
        "GET k was not a cache hit"
    );
    // A miss, answered by the pool.
    let v: Option<String> = q(&mut reader, &["GET", "missing"]);
    assert_eq!(v, None);
    assert_eq!(err(&mut reader, &["SET", "k", "x"]), NO_SET);
    assert_eq!(
        err(&mut reader, &["INCR", "k"]),
        "NOPERM this user has no permissions to run the 'incr' command"
    );
    // New rules reach a connected client at its next command, on both paths.
    let _: () = q(&mut admin, &["ACL", "SETUSER", "reader", "-get"]);
    let before = rtc_commands(&mut admin);
    let denied = "NOPERM this user has no permissions to run the 'get' command";
    assert_eq!(err(&mut reader, &["GET", "k"]), denied);
    assert_eq!(err(&mut reader, &["GET", "missing"]), denied);
    assert_eq!(
        rtc_commands(&mut admin),
        before,
        "a refused GET counted as served"
    );
    let v: String = q(&mut admin, &["GET", "k"]);
    assert_eq!(v, "v");
}

#[test]
fn user_restricted_to_a_key_pattern() {
    let server = TestServer::start();
    let mut admin = kvik_testkit::connect(server.port);
    for k in ["app:1", "other"] {
        let _: () = q(&mut admin, &["SET", k, "v"]);
        let _: String = q(&mut admin, &["GET", k]);
    }
    let _: () = q(
        &mut admin,
        &[
            "ACL", "SETUSER", "app", "on", ">pw", "+@all", "~app:*", "%R~ro:*",
        ],
    );
    let mut app = login(server.port, "app", "pw");
    let v: String = q(&mut app, &["GET", "app:1"]);
    assert_eq!(v, "v");
    // Cache hit and miss of a key outside the pattern are refused alike.
    assert_eq!(err(&mut app, &["GET", "other"]), NO_KEY);
    assert_eq!(err(&mut app, &["GET", "nothere"]), NO_KEY);
    assert_eq!(err(&mut app, &["MGET", "app:1", "other"]), NO_KEY);
    assert_eq!(err(&mut app, &["SET", "ro:1", "v"]), NO_KEY);
    let v: Option<String> = q(&mut app, &["GET", "ro:1"]);
    assert_eq!(v, None);
    let _: () = q(&mut app, &["SET", "app:2", "v"]);
    // Read-write of one key, write-only of the other.
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "app", "resetkeys", "~src", "%W~dst"],
    );
    let _: i64 = q(&mut app, &["SADD", "src", "m"]);
    let _: i64 = q(&mut app, &["SUNIONSTORE", "dst", "src"]);
    assert_eq!(err(&mut app, &["SUNIONSTORE", "src", "dst"]), NO_KEY);
}

#[test]
fn acl_log_records_refusals_and_failed_logins() {
    let server = TestServer::start();
    let mut admin = kvik_testkit::connect(server.port);
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "u", "on", ">pw", "+get", "~a*"],
    );
    let mut u = login(server.port, "u", "pw");
    assert_eq!(err(&mut u, &["GET", "b"]), NO_KEY);
    assert_eq!(err(&mut u, &["GET", "b"]), NO_KEY);
    assert!(err(&mut u, &["SET", "a", "1"]).starts_with("NOPERM"));
    let mut other = kvik_testkit::connect(server.port);
    assert_eq!(
        err(&mut other, &["AUTH", "u", "wrong"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    let log: Vec<Vec<Value>> = q(&mut admin, &["ACL", "LOG"]);
    let fields = |e: &Vec<Value>| -> Vec<String> {
        e.iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::Int(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(log.len(), 3, "{log:?}");
    let newest = fields(&log[0]);
    assert_eq!(
        newest[..10],
        [
            "count", "1", "reason", "auth", "context", "toplevel", "object", "AUTH", "username",
            "u"
        ]
    );
    let cmd = fields(&log[1]);
    assert_eq!(cmd[3], "command");
    assert_eq!(cmd[7], "set");
    let key = fields(&log[2]);
    assert_eq!(
        (key[1].as_str(), key[3].as_str(), key[7].as_str()),
        ("2", "key", "b")
    );
    assert_eq!(key[10], "age-seconds");
    assert!(key[13].contains("user=u"), "{}", key[13]);
    let one: Vec<Value> = q(&mut admin, &["ACL", "LOG", "1"]);
    assert_eq!(one.len(), 1);
    let _: () = q(&mut admin, &["ACL", "LOG", "RESET"]);
    let none: Vec<Value> = q(&mut admin, &["ACL", "LOG"]);
    assert!(none.is_empty());
}

#[test]
fn acl_save_and_load_round_trip_through_the_acl_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "user default on nopass ~* &* +@all\n").unwrap();
    let file_arg = file.to_str().unwrap().to_string();
    let mut server = TestServer::start_with(&["--aclfile", &file_arg]);
    let mut admin = kvik_testkit::connect(server.port);
    let _: () = q(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "alice",
            "on",
            ">pw",
            "~a*",
            "&ch*",
            "+get",
            "(+set ~b*)",
        ],
    );
    let saved: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    let _: () = q(&mut admin, &["ACL", "SAVE"]);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "alice", "-get"]);
    let _: () = q(&mut admin, &["ACL", "SETUSER", "bob", "on"]);
    let mut alice = login(server.port, "alice", "pw");
    let _: () = q(&mut admin, &["ACL", "LOAD"]);
    let loaded: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    assert_eq!(loaded, saved);
    // alice's connection sees the loaded rules.
    let v: Option<String> = q(&mut alice, &["GET", "a1"]);
    assert_eq!(v, None);
    // A bad file changes nothing.
    std::fs::write(&file, "user carol on +nosuchcommand\n").unwrap();
    let e = err(&mut admin, &["ACL", "LOAD"]);
    assert!(e.contains("Unknown command or category name in ACL"), "{e}");
    let _: () = q(&mut admin, &["ACL", "SAVE"]);
    // Users come back from the file after a restart.
    server.restart();
    let mut admin = kvik_testkit::connect(server.port);
    let after: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    assert_eq!(after, saved);
    // Without aclfile, SAVE and LOAD refuse as Redis.
    let plain = TestServer::start();
    let mut con = kvik_testkit::connect(plain.port);
    assert!(err(&mut con, &["ACL", "SAVE"])
        .starts_with("ERR This Redis instance is not configured to use an ACL file."));
}

#[test]
fn users_in_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("kvik.conf");
    std::fs::write(
        &conf,
        "user worker on >secret ~jobs:* +@list\nrequirepass adminpw\n",
    )
    .unwrap();
    let server = TestServer::start_with(&[conf.to_str().unwrap()]);
    let mut con = kvik_testkit::connect(server.port);
    assert_eq!(
        err(&mut con, &["GET", "x"]),
        "NOAUTH Authentication required."
    );
    let _: () = q(&mut con, &["AUTH", "adminpw"]);
    let who: String = q(&mut con, &["ACL", "WHOAMI"]);
    assert_eq!(who, "default");
    let mut w = login(server.port, "worker", "secret");
    let _: i64 = q(&mut w, &["LPUSH", "jobs:1", "x"]);
    assert_eq!(err(&mut w, &["LPUSH", "other", "x"]), NO_KEY);
}

#[test]
fn auth_and_hello_auth() {
    let server = TestServer::start();
    let mut admin = kvik_testkit::connect(server.port);
    assert_eq!(
        err(&mut admin, &["AUTH", "pw"]),
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*"],
    );
    let _: () = q(
        &mut admin,
        &["ACL", "SETUSER", "off", "off", ">pw", "+@all", "~*"],
    );
    let mut con = kvik_testkit::connect(server.port);
    let wrong = "WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(err(&mut con, &["AUTH", "u", "nope"]), wrong);
    assert_eq!(err(&mut con, &["AUTH", "nosuch", "pw"]), wrong);
    assert_eq!(err(&mut con, &["AUTH", "off", "pw"]), wrong);
    assert_eq!(err(&mut con, &["HELLO", "3", "AUTH", "u", "nope"]), wrong);
    let hello: Value = q(&mut con, &["HELLO", "3", "AUTH", "u", "pw"]);
    assert!(format!("{hello:?}").contains("proto"), "{hello:?}");
    let who: String = q(&mut con, &["ACL", "WHOAMI"]);
    assert_eq!(who, "u");
    let _: () = q(&mut con, &["AUTH", "default", "anything"]); // default is nopass
    let who: String = q(&mut con, &["ACL", "WHOAMI"]);
    assert_eq!(who, "default");
    // CLIENT LIST shows the user; CLIENT KILL USER picks its clients.
    let mut u = login(server.port, "u", "pw");
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(list.contains(" user=u "), "{list}");
    let killed: i64 = q(&mut admin, &["CLIENT", "KILL", "USER", "u"]);
    assert_eq!(killed, 1);
    assert!(redis::cmd("PING").query::<Value>(&mut u).is_err());
    assert_eq!(
        err(&mut admin, &["CLIENT", "KILL", "USER", "nosuch"]),
        "ERR No such user 'nosuch'"
    );
    // A deleted user's clients are disconnected.
    let mut u = login(server.port, "u", "pw");
    let n: i64 = q(&mut admin, &["ACL", "DELUSER", "u", "nosuch"]);
    assert_eq!(n, 1);
    assert!(redis::cmd("GET").arg("k").query::<Value>(&mut u).is_err());
    assert_eq!(
        err(&mut admin, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
}

/// Reads one RESP reply's bytes as text (for replies the client library folds into errors).
fn raw_exchange(port: u16, requests: &[&[&str]], expect: &str) -> String {
    let mut s = connect_raw(port);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for r in requests {
        s.write_all(&resp_str(r)).unwrap();
    }
    let (out, _) = kvik_testkit::read_raw(&mut s, expect.len());
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn multi_exec_and_scripts_check_permissions() {
    let server = TestServer::start();
    let mut admin = kvik_testkit::connect(server.port);
    let _: () = q(
        &mut admin,
        &[
            "ACL", "SETUSER", "u", "on", ">pw", "+get", "+set", "+multi", "+exec", "+eval",
            "+publish", "~a*", "&ch*",
        ],
    );
    // Refused while queueing: EXECABORT.
    let mut u = login(server.port, "u", "pw");
    let _: () = q(&mut u, &["MULTI"]);
    assert_eq!(err(&mut u, &["SET", "b", "1"]), NO_KEY);
    assert!(err(&mut u, &["EXEC"]).starts_with("EXECABORT"));
    // Rules changed between queueing and EXEC: that command fails inside EXEC.
    let expect = "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n";
    let mut s = connect_raw(server.port);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for r in [
        &["AUTH", "u", "pw"][..],
        &["MULTI"],
        &["SET", "a1", "1"],
        &["GET", "a1"],
    ] {
        s.write_all(&resp_str(r)).unwrap();
    }
    let (head, _) = kvik_testkit::read_raw(&mut s, "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n".len());
    assert_eq!(
        String::from_utf8_lossy(&head),
        "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
    );
    let _: () = q(&mut admin, &["ACL", "SETUSER", "u", "-get"]);
    s.write_all(&resp_str(&["EXEC"])).unwrap();
    let (tail, _) = kvik_testkit::read_raw(&mut s, expect.len() - head.len());
    assert_eq!(String::from_utf8_lossy(&tail), expect[head.len()..]);
    // Scripts: a declared key is checked with EVAL itself, each redis.call like a command.
    let expect = concat!(
        "+OK\r\n",
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
        "-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments\r\n",
        "-ERR The user executing the script can't run this command or subcommand\r\n",
    );
    let script = raw_exchange(
        server.port,
        &[
            &["AUTH", "u", "pw"],
            &["EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "b"],
            &["EVAL", "return redis.pcall('set', 'b', 'x')", "0"],
            &["EVAL", "return redis.pcall('incr', 'a')", "0"],
        ],
        expect,
    );
    assert_eq!(script, expect);
    // Channels.
    let n: i64 = q(&mut u, &["PUBLISH", "ch1", "m"]);
    assert_eq!(n, 0);
    assert_eq!(
        err(&mut u, &["PUBLISH", "other", "m"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
}

#[test]
fn acl_subcommands_match_redis_replies() {
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut k = kvik_testkit::connect(server.port);
    let mut r = kvik_testkit::connect(redis.port);
    let cases: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "t",
            "on",
            ">p1",
            "~foo*",
            "%R~bar*",
            "%W~baz*",
            "&chan*",
            "+get",
            "(+set ~x*)",
        ],
        &[
            "ACL",
            "SETUSER",
            "t2",
            "+@all",
            "-@dangerous",
            "+config|get",
        ],
        &["ACL", "GETUSER", "t2"],
        &["ACL", "LIST"],
        &["ACL", "GETUSER", "t"],
        &["ACL", "GETUSER", "default"],
        &["ACL", "GETUSER", "nosuch"],
        &["ACL", "SETUSER", "t", "reset"],
        &["ACL", "LIST"],
        &["ACL", "SETUSER", "t", "foo"],
        &["ACL", "SETUSER", "t", "+nosuch"],
        &["ACL", "SETUSER", "t", "#abc"],
        &["ACL", "SETUSER", "t", "(+get"],
        &["ACL", "SETUSER", "t", "allkeys", "~y"],
        &["ACL", "SETUSER", "t", "<nope"],
        &["ACL", "USERS"],
        &["ACL", "WHOAMI"],
        &["ACL", "CAT"],
        &["ACL", "CAT", "nosuch"],
        &["ACL", "DRYRUN", "x", "get"],
        &["ACL", "SETUSER", "d", "on", "nopass", "+get", "~a*"],
        &["ACL", "DRYRUN", "d", "get", "b"],
        &["ACL", "DRYRUN", "d", "set", "a", "1"],
        &["ACL", "DRYRUN", "d", "get", "a"],
        &["ACL", "DRYRUN", "d", "nosuch"],
        &["ACL", "GENPASS", "0"],
        &["ACL", "DELUSER", "t", "d", "nosuch"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "LOG", "x"],
        &["ACL", "SAVE"],
    ];
    for c in cases {
        let kv: redis::RedisResult<Value> = redis::cmd(c[0]).arg(&c[1..]).query(&mut k);
        let rv: redis::RedisResult<Value> = redis::cmd(c[0]).arg(&c[1..]).query(&mut r);
        assert_eq!(format!("{kv:?}"), format!("{rv:?}"), "{c:?}");
    }
    let p: String = q(&mut k, &["ACL", "GENPASS"]);
    assert_eq!(p.len(), 64);
    let p: String = q(&mut k, &["ACL", "GENPASS", "5"]);
    assert_eq!(p.len(), 2);
}

/// Rules a random user is made of.
const RULES: &[&str] = &[
    "+@all",
    "-@all",
    "+@read",
    "+@write",
    "-@write",
    "+@string",
    "+@hash",
    "+@list",
    "-@list",
    "+@keyspace",
    "-@keyspace",
    "-@dangerous",
    "+@fast",
    "-@slow",
    "+@pubsub",
    "+get",
    "-get",
    "+set",
    "-set",
    "+hset",
    "+del",
    "+incr",
    "+mget",
    "+config|get",
    "+client|id",
    "+select|0",
    "~a*",
    "~b*",
    "%R~c*",
    "%W~d*",
    "%RW~e*",
    "allkeys",
    "resetkeys",
    "&ch*",
    "allchannels",
    "resetchannels",
    "(+set ~x*)",
    "(+@read %R~*)",
    "(+@write ~d*)",
    "+@sortedset",
    "+@set",
    "+@bitmap",
    "+@hyperloglog",
    "+@geo",
    "+@stream",
    "-@read",
    "+@scripting",
    "%R~a*",
    "%W~b*",
    "-hset",
    "+sort",
    "+eval",
    "+client",
    "-client|kill",
    "&other",
    "(+get %W~*)",
    "(-@all +@list ~e*)",
];

/// Commands a random user tries (K: a random key).
const COMMANDS: &[&str] = &[
    "GET K",
    "SET K v",
    "SET K v GET",
    "INCR K",
    "DEL K K",
    "EXISTS K",
    "TYPE K",
    "STRLEN K",
    "HSET K f v",
    "HGET K f",
    "LPUSH K v",
    "LPOP K",
    "LLEN K",
    "SADD K m",
    "SUNIONSTORE K K K",
    "SMOVE K K m",
    "RENAME K K",
    "COPY K K",
    "MGET K K",
    "MSET K v K v",
    "EXPIRE K 100",
    "TTL K",
    "APPEND K x",
    "GETDEL K",
    "ZADD K 1 m",
    "ZUNIONSTORE K 2 K K",
    "LMOVE K K LEFT RIGHT",
    "PUBLISH ch1 m",
    "PUBLISH other m",
    "CONFIG GET maxmemory",
    "CONFIG SET maxmemory 0",
    "CLIENT ID",
    "SELECT 0",
    "SELECT 1",
    "PING",
    "ECHO x",
    "DBSIZE",
    "KEYS *",
    "SCAN 0",
    "FLUSHDB",
    "OBJECT ENCODING K",
    "SORT K",
    "HINCRBY K f 1",
    "SETNX K v",
    "GETSET K v",
    "SORT K STORE K",
    "SORT_RO K",
    "PFADD K a",
    "PFMERGE K K",
    "PFCOUNT K",
    "SETBIT K 1 1",
    "BITOP AND K K K",
    "BITCOUNT K",
    "GEOADD K 1 1 m",
    "GEOSEARCHSTORE K K FROMLONLAT 1 1 BYRADIUS 1 km",
    "XADD K * f v",
    "XLEN K",
    "XRANGE K - +",
    "EVAL return 1 K",
    "EVAL_RO return 1 K",
    "SINTERSTORE K K K",
    "SMEMBERS K",
    "ZRANGESTORE K K 0 -1",
    "ZRANGE K 0 -1",
    "HGETALL K",
    "LRANGE K 0 -1",
    "RPOPLPUSH K K",
    "UNLINK K",
    "PERSIST K",
    "TOUCH K",
    "EXPIRETIME K",
    "CLIENT KILL ID 999999",
    "CLIENT GETNAME",
    "INCRBYFLOAT K 1.5",
    "DECR K",
    "GETEX K",
];

const RANDOM_KEYS: &[&str] = &["a1", "b1", "c1", "d1", "e1", "x1", "z1"];

/// What a reply says about permission: the NOPERM text, or "allowed".
fn verdict(r: redis::RedisResult<Value>) -> String {
    match r {
        Err(e) if e.code() == Some("NOPERM") => format!("{e:?}"),
        _ => "allowed".into(),
    }
}

/// Random users (a few random rules each) run random commands on kvik and on redis-server: each
/// command must be refused on both (with the same NOPERM text) or on neither, and ACL DRYRUN
/// must answer the same. `KVIK_ACL_SEED=<n>` replays a run, `KVIK_ACL_ROUNDS=<n>` runs more
/// users (default 60).
#[test]
fn random_users_are_allowed_and_denied_as_by_redis() {
    let seed: u64 = std::env::var("KVIK_ACL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let (mut ka, mut ra) = (
        kvik_testkit::connect(server.port),
        kvik_testkit::connect(redis.port),
    );
    let rounds: usize = std::env::var("KVIK_ACL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (mut refused, mut tried) = (0, 0);
    // A random rule list can be refused as a whole (`allkeys` then `~a*`: "Adding a pattern
    // after the * pattern ..."), on both servers alike, and then leaves the user as it was: it
    // must exist from the start, or the first round's AUTH fails.
    for con in [&mut ka, &mut ra] {
        let _: () = q(con, &["ACL", "SETUSER", "u", "on", "nopass"]);
    }
    for round in 0..rounds {
        let mut setuser = vec!["ACL", "SETUSER", "u", "reset", "on", "nopass"];
        for _ in 0..rng.gen_range(1..6) {
            setuser.push(RULES[rng.gen_range(0..RULES.len())]);
        }
        let kv = verdict_full(redis::cmd(setuser[0]).arg(&setuser[1..]).query(&mut ka));
        let rv = verdict_full(redis::cmd(setuser[0]).arg(&setuser[1..]).query(&mut ra));
        assert_eq!(kv, rv, "seed {seed} round {round}: {setuser:?}");
        let (mut k, mut r) = (login(server.port, "u", "x"), login(redis.port, "u", "x"));
        for _ in 0..25 {
            let template = COMMANDS[rng.gen_range(0..COMMANDS.len())];
            let args: Vec<&str> = template
                .split(' ')
                .map(|w| {
                    if w == "K" {
                        RANDOM_KEYS[rng.gen_range(0..RANDOM_KEYS.len())]
                    } else {
                        w
                    }
                })
                .collect();
            let kv = verdict(redis::cmd(args[0]).arg(&args[1..]).query(&mut k));
            let rv = verdict(redis::cmd(args[0]).arg(&args[1..]).query(&mut r));
            refused += usize::from(rv != "allowed");
            tried += 1;
            assert_eq!(
                kv, rv,
                "seed {seed} round {round}: user {setuser:?} ran {args:?}"
            );
            let mut dry = vec!["ACL", "DRYRUN", "u"];
            dry.extend(&args);
            let kd = verdict_full(redis::cmd(dry[0]).arg(&dry[1..]).query(&mut ka));
            let rd = verdict_full(redis::cmd(dry[0]).arg(&dry[1..]).query(&mut ra));
            assert_eq!(
                kd, rd,
                "seed {seed} round {round}: user {setuser:?} {dry:?}"
            );
        }
    }
    // Both outcomes were exercised.
    assert!(
        refused > 0 && refused < tried,
        "seed {seed}: {refused} of {tried} refused"
    );
}

fn verdict_full(r: redis::RedisResult<Value>) -> String {
    format!("{r:?}")
}

/// Every category holds the same commands as in redis-server, among the commands both have
/// (categories come from the command table, so this checks the table's data).
#[test]
fn categories_hold_the_same_commands_as_redis() {
    use std::collections::BTreeSet;
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut k = kvik_testkit::connect(server.port);
    let mut r = kvik_testkit::connect(redis.port);
    let categories: Vec<String> = q(&mut r, &["ACL", "CAT"]);
    let kvik_categories: Vec<String> = q(&mut k, &["ACL", "CAT"]);
    assert_eq!(kvik_categories, categories);
    let members = |con: &mut Connection| -> Vec<BTreeSet<String>> {
        categories
            .iter()
            .map(|c| {
                q::<Vec<String>>(con, &["ACL", "CAT", c])
                    .into_iter()
                    .collect()
            })
            .collect()
    };
    let (km, rm) = (members(&mut k), members(&mut r));
    let all = |m: &[BTreeSet<String>]| m.iter().flatten().cloned().collect::<BTreeSet<_>>();
    let both: BTreeSet<String> = all(&km).intersection(&all(&rm)).cloned().collect();
    for (i, c) in categories.iter().enumerate() {
        let kc: BTreeSet<_> = km[i].intersection(&both).collect();
        let rc: BTreeSet<_> = rm[i].intersection(&both).collect();
        assert_eq!(kc, rc, "@{c}");
    }
}

//! Scripting end to end: EVAL / EVALSHA / SCRIPT with the `redis` crate's `Script` and
//! redis-py's `register_script`, the checks on commands called from scripts, a script that
//! fails half-way, runaway scripts and SCRIPT KILL / FUNCTION KILL, functions surviving a
//! restart, and the atomicity kvik promises (see cmd/script's header): scripts on the same
//! declared keys never interleave.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redis::Value;

use crate::common::*;

#[test]
fn eval_evalsha_and_the_script_cache() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return 1 + 1", "0"]), 2);
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["EVAL", "return {KEYS[1], ARGV[1]}", "1", "k", "a"]
        ),
        vec!["k", "a"]
    );
    let sha: String = q(
        &mut c,
        &[
            "SCRIPT",
            "LOAD",
            "return redis.call('set', KEYS[1], ARGV[1])",
        ],
    );
    assert_eq!(sha.len(), 40);
    assert_eq!(q::<String>(&mut c, &["EVALSHA", &sha, "1", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    // The SHA is case-insensitive, as in Redis.
    let upper = sha.to_uppercase();
    assert_eq!(
        q::<String>(&mut c, &["EVALSHA", &upper, "1", "k", "w"]),
        "OK"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "w");
    assert_eq!(
        err(&mut c, &["EVALSHA", &sha[..39], "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &["SCRIPT", "EXISTS", &sha, &sha.to_uppercase(), "ffff"]
        ),
        vec![1, 1, 0]
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(
        err(&mut c, &["EVALSHA", &sha, "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    // The `redis` crate's Script: EVALSHA, NOSCRIPT, then EVAL, then EVALSHA again.
    let script = redis::Script::new("return redis.call('incrby', KEYS[1], ARGV[1])");
    for want in [5, 10] {
        let got: i64 = script.key("n").arg(5).invoke(&mut c).unwrap();
        assert_eq!(got, want);
    }
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", script.get_hash()]),
        vec![1]
    );
    // numkeys errors, compile errors.
    assert_eq!(
        err(&mut c, &["EVAL", "return 1", "2", "k"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err(&mut c, &["EVAL", "return 1", "-1"]),
        "ERR Number of keys can't be negative"
    );
    assert!(err(&mut c, &["EVAL", "return (", "0"]).starts_with("ERR Error compiling script"));
    // Inside MULTI/EXEC (EXEC locks the declared keys; the script's own lock is re-entrant).
    let again: String = q(
        &mut c,
        &[
            "SCRIPT",
            "LOAD",
            "return redis.call('set', KEYS[1], ARGV[1])",
        ],
    );
    assert_eq!(again, sha);
    let mut tx = redis::pipe();
    tx.atomic()
        .cmd("EVAL")
        .arg("return redis.call('incr', KEYS[1])")
        .arg(1)
        .arg("t")
        .cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg("t")
        .arg("x");
    let (a, b): (i64, String) = tx.query(&mut c).unwrap();
    assert_eq!((a, b.as_str()), (1, "OK"));
}

#[test]
fn commands_called_from_scripts_are_checked_as_redis_does() {
    let s = TestServer::start();
    let mut c = s.client();
    let e = err(&mut c, &["EVAL", "return redis.call('nosuch')", "0"]);
    assert!(
        e.starts_with("ERR Unknown Redis command called from script"),
        "{e}"
    );
    let e = err(&mut c, &["EVAL", "return redis.call('get')", "0"]);
    assert!(
        e.starts_with("ERR Wrong number of args calling Redis command from script"),
        "{e}"
    );
    let e = err(&mut c, &["EVAL", "return redis.call('multi')", "0"]);
    assert!(
        e.starts_with("ERR This Redis command is not allowed from script"),
        "{e}"
    );
    let e = err(
        &mut c,
        &["EVAL", "return redis.call('eval', 'return 1', '0')", "0"],
    );
    assert!(
        e.starts_with("ERR This Redis command is not allowed from script"),
        "{e}"
    );
    // WRONGTYPE, raised by call, returned by pcall.
    let _: () = q(&mut c, &["LPUSH", "l", "x"]);
    let e = err(
        &mut c,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "l"],
    );
    assert!(e.starts_with("WRONGTYPE"), "{e}");
    let v: String = q(
        &mut c,
        &[
            "EVAL",
            "local r = redis.pcall('get', KEYS[1]) return r['err']",
            "1",
            "l",
        ],
    );
    assert!(v.starts_with("WRONGTYPE"), "{v}");
    // Read-only scripts.
    let e = err(
        &mut c,
        &["EVAL_RO", "return redis.call('set', KEYS[1], 1)", "1", "k"],
    );
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    let e = err(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 1)",
            "1",
            "k",
        ],
    );
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    assert_eq!(
        err(&mut c, &["EVAL_RO", "#!lua\nreturn 1", "0"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["EVAL_RO", "return redis.call('llen', KEYS[1])", "1", "l"]
        ),
        1
    );
    // A script's SELECT does not outlive it; RESP3 replies inside a script.
    let _: () = q(&mut c, &["SET", "db0", "yes"]);
    let v: String = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('select', 3) redis.call('set', 'in3', 'x') return 'ok'",
            "0",
        ],
    );
    assert_eq!(v, "ok");
    assert_eq!(q::<String>(&mut c, &["GET", "db0"]), "yes");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["EVAL", "redis.setresp(3) local m = redis.call('hgetall', KEYS[1]) return {tostring(m['map'] ~= nil)}", "1", "h"]),
        vec!["true"]
    );
}

#[test]
fn a_script_that_fails_half_way_keeps_its_earlier_writes() {
    let s = TestServer::start();
    let mut c = s.client();
    let e = err(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'first') redis.call('lpush', KEYS[1], 'x') redis.call('set', KEYS[2], 'never')",
            "2",
            "a",
            "b",
        ],
    );
    assert!(e.starts_with("WRONGTYPE"), "{e}");
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "first");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "b"]), 0);
    let e = err(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'second') error('boom')",
            "1",
            "a",
        ],
    );
    assert!(e.contains("boom"), "{e}");
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "second");
}

/// Waits until a script is busy: `probe KILL` (SCRIPT or FUNCTION, answered on the I/O thread,
/// so it needs no worker) stops answering NOTBUSY. Returns the error it got then (BUSY for the
/// KILL of the other kind, UNKILLABLE once the script wrote).
fn wait_busy(c: &mut redis::Connection, probe: &str) -> String {
    let mut last = String::new();
    let busy = eventually(Duration::from_secs(20), || {
        match redis::cmd(probe).arg("KILL").query::<String>(c) {
            Ok(ok) => panic!("{probe} KILL answered {ok}"),
            Err(e) => {
                last = e.to_string();
                !last.contains("No scripts in execution")
            }
        }
    });
    assert!(busy, "the server never became busy: {last}");
    last
}

#[test]
fn a_runaway_script_is_busy_and_script_kill_stops_it_even_with_one_worker() {
    // One worker: the loop holds it, so SCRIPT KILL must not need one.
    let s = TestServer::start_with(&["--workers", "1", "--busy-reply-threshold", "100"]);
    let port = s.port;
    let runner = thread::spawn(move || {
        let mut c = kvik_testkit::connect(port);
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<Value>(&mut c)
            .unwrap_err()
            .to_string()
    });
    let mut c = s.client();
    let busy_text =
        "Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    let busy = wait_busy(&mut c, "FUNCTION");
    assert!(busy.contains(busy_text), "{busy}");
    // Other commands get BUSY, answered without a worker.
    let ping = redis::cmd("PING").query::<String>(&mut c).unwrap_err();
    assert_eq!(ping.code(), Some("BUSY"), "{ping}");
    assert!(ping.to_string().contains(busy_text), "{ping}");
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    let killed = runner.join().unwrap();
    assert!(
        killed.contains("Script killed by user with SCRIPT KILL"),
        "{killed}"
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert!(err(&mut c, &["SCRIPT", "KILL"]).contains("No scripts in execution right now."));
}

#[test]
fn a_runaway_script_that_wrote_is_unkillable_and_function_kill_stops_functions() {
    let s = TestServer::start_with(&["--busy-reply-threshold", "100"]);
    let mut c = s.client();
    let lib = "#!lua name=loops\n\
        redis.register_function('spin', function(keys, args) while true do end end)\n\
        redis.register_function('spin_after_write', function(keys, args)\n\
          redis.call('set', keys[1], 'w') local t0 = tonumber(redis.call('time')[1])\n\
          while tonumber(redis.call('time')[1]) < t0 + 3 do end return 'done' end)";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "loops");
    let port = s.port;
    let runner = thread::spawn(move || {
        let mut c = kvik_testkit::connect(port);
        redis::cmd("FCALL")
            .arg("spin")
            .arg(0)
            .query::<Value>(&mut c)
            .unwrap_err()
            .to_string()
    });
    let busy = wait_busy(&mut c, "SCRIPT");
    assert!(busy.contains("You can only call FUNCTION KILL"), "{busy}");
    let stats = format!("{:?}", qv(&mut c, &["FUNCTION", "STATS"]));
    assert!(stats.contains("spin"), "{stats}");
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "KILL"]), "OK");
    let killed = runner.join().unwrap();
    assert!(killed.contains("killed"), "{killed}");

    let runner = thread::spawn(move || {
        let mut c = kvik_testkit::connect(port);
        redis::cmd("FCALL")
            .arg("spin_after_write")
            .arg(1)
            .arg("w")
            .query::<String>(&mut c)
    });
    let unkillable = wait_busy(&mut c, "SCRIPT");
    assert!(unkillable.contains("UNKILLABLE"), "{unkillable}");
    assert!(err(&mut c, &["FUNCTION", "KILL"]).contains("UNKILLABLE"));
    assert_eq!(runner.join().unwrap().unwrap(), "done");
    assert_eq!(q::<String>(&mut c, &["GET", "w"]), "w");
}

#[test]
fn functions_survive_a_restart() {
    let mut s = TestServer::start();
    let mut c = s.client();
    let lib = "#!lua name=counter\n\
        redis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\n\
        redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "counter");
    assert!(err(&mut c, &["FUNCTION", "LOAD", lib]).contains("already exists"));
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "n", "3"]), 3);
    assert_eq!(q::<String>(&mut c, &["FCALL_RO", "peek", "1", "n"]), "3");
    assert!(err(&mut c, &["FCALL_RO", "bump", "1", "n", "1"]).contains("*_ro command"));
    let dump: Vec<u8> = q(&mut c, &["FUNCTION", "DUMP"]);
    // Other connections (other worker threads) see the library at once.
    let mut c2 = s.client();
    assert_eq!(q::<i64>(&mut c2, &["FCALL", "BUMP", "1", "n", "1"]), 4);
    let _: () = q(&mut c, &["SCRIPT", "LOAD", "return 1"]);
    s.restart();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "n", "1"]), 5);
    let list = format!("{:?}", qv(&mut c, &["FUNCTION", "LIST", "WITHCODE"]));
    assert!(list.contains("counter") && list.contains("peek"), "{list}");
    // FLUSHALL keeps functions (as Redis); FUNCTION FLUSH and DELETE persist too.
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "n", "1"]), 1);
    let _: () = q(&mut c, &["FUNCTION", "DELETE", "counter"]);
    assert_eq!(
        err(&mut c, &["FCALL", "bump", "1", "n", "1"]),
        "ERR Function not found"
    );
    s.restart();
    let mut c = s.client();
    assert_eq!(
        err(&mut c, &["FCALL", "bump", "1", "n", "1"]),
        "ERR Function not found"
    );
    let mut restore = redis::cmd("FUNCTION");
    restore.arg("RESTORE").arg(&dump);
    let _: () = restore.query(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "n", "1"]), 2);
    s.restart();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["FCALL", "bump", "1", "n", "1"]), 3);
}

#[test]
fn scripts_on_the_same_keys_never_interleave() {
    let s = TestServer::start();
    let mut c = s.client();
    // Read-modify-write in two steps: lost updates if two scripts interleave.
    let incr = redis::Script::new(
        "local v = tonumber(redis.call('get', KEYS[1]) or '0') \
         redis.call('set', KEYS[1], v + 1) return v + 1",
    );
    // Moves an amount between two keys with two writes; the sum is invariant.
    let transfer = redis::Script::new(
        "local a = tonumber(redis.call('get', KEYS[1])) local n = tonumber(ARGV[1]) \
         redis.call('set', KEYS[1], a - n) \
         redis.call('set', KEYS[2], tonumber(redis.call('get', KEYS[2])) + n) return 1",
    );
    let sum = "#!lua flags=no-writes\n\
        return tonumber(redis.call('get', KEYS[1])) + tonumber(redis.call('get', KEYS[2]))";
    let _: () = q(&mut c, &["MSET", "a", "500", "b", "500"]);
    let stop = Arc::new(AtomicBool::new(false));
    let port = s.port;
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut c = kvik_testkit::connect(port);
                let mut seen = 0;
                while !stop.load(Ordering::Relaxed) {
                    let total: i64 = redis::cmd("EVAL_RO")
                        .arg(sum)
                        .arg(2)
                        .arg("a")
                        .arg("b")
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(total, 1000, "a reader saw a transfer half done");
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    let writers: Vec<_> = (0..6)
        .map(|i| {
            let (incr, transfer) = (incr.clone(), transfer.clone());
            thread::spawn(move || {
                let mut c = kvik_testkit::connect(port);
                for j in 0..300 {
                    let _: i64 = incr.key("counter").invoke(&mut c).unwrap();
                    let (from, to) = if (i + j) % 2 == 0 {
                        ("a", "b")
                    } else {
                        ("b", "a")
                    };
                    let _: i64 = transfer
                        .key(from)
                        .key(to)
                        .arg(j % 7)
                        .invoke(&mut c)
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), 1800);
    let a: i64 = q(&mut c, &["GET", "a"]);
    let b: i64 = q(&mut c, &["GET", "b"]);
    assert_eq!(a + b, 1000);
}

#[test]
fn undeclared_keys_work_outside_cluster_mode() {
    let s = TestServer::start();
    let mut c = s.client();
    let v: i64 = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', 'undeclared', 7) return redis.call('incr', 'undeclared')",
            "0",
        ],
    );
    assert_eq!(v, 8);
}

#[test]
fn redis_py_register_script() {
    let s = TestServer::start();
    let script = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
add = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
print(add(keys=['x'], args=[2]), add(keys=['x'], args=[3]))
r.script_flush()
print(add(keys=['x'], args=[1]))
p = r.pipeline()
add(keys=['x'], args=[10], client=p)
print(p.execute())
print(r.script_exists(add.sha))
"#;
    let Some(stdout) = kvik_testkit::python_stdout(script, &[&s.port.to_string()]) else {
        return;
    };
    assert_eq!(stdout, "2 5\n6\n[16]\n[True]\n");
}

/// A key (with `prefix`) in the slots node `i` of an even 2-way split owns.
fn key_on(i: usize, prefix: &str) -> String {
    let ranges = kvik_resp::topology::even_split(2);
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .find(|k| {
            let s = kvik_resp::cluster::key_slot(k.as_bytes());
            s >= ranges[i].0 && s <= ranges[i].1
        })
        .unwrap()
}

#[test]
fn cluster_mode_routes_by_the_first_key_and_keeps_scripts_in_one_slot() {
    let nodes = kvik_testkit::start_kvik_cluster(env!("CARGO_BIN_EXE_kvik-server"), 2, &[]);
    let mut c = nodes[0].client();
    let (here, there) = (key_on(0, "h"), key_on(1, "t"));
    let set = "return redis.call('set', KEYS[1], ARGV[1])";
    assert_eq!(q::<String>(&mut c, &["EVAL", set, "1", &here, "v"]), "OK");
    assert!(err(&mut c, &["EVAL", set, "1", &there, "v"]).starts_with("MOVED"));
    assert!(err(&mut c, &["EVAL", set, "2", &here, &there, "v"]).starts_with("CROSSSLOT"));
    // Undeclared keys: another node's is refused; one of another slot here is refused for
    // scripts with a shebang (Redis 7 keeps cross-slot access for scripts without one).
    let e = err(
        &mut c,
        &["EVAL", "return redis.call('get', ARGV[1])", "0", &there],
    );
    assert!(
        e.contains("Script attempted to access a non local key in a cluster node"),
        "{e}"
    );
    let other_here = key_on(0, "o");
    let two = "redis.call('set', KEYS[1], 1) return redis.call('set', ARGV[1], 2)";
    if kvik_resp::cluster::key_slot(other_here.as_bytes())
        != kvik_resp::cluster::key_slot(here.as_bytes())
    {
        let with_shebang = format!("#!lua\n{two}");
        let e = err(&mut c, &["EVAL", &with_shebang, "1", &here, &other_here]);
        assert!(
            e.contains("Script attempted to access keys that do not hash to the same slot"),
            "{e}"
        );
        assert_eq!(
            q::<String>(&mut c, &["EVAL", two, "1", &here, &other_here]),
            "OK"
        );
    }
    let e = err(&mut c, &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"]);
    assert!(e.contains("no-cluster"), "{e}");
}

#[test]
fn an_undeclared_key_held_by_another_script_fails_instead_of_deadlocking() {
    let s = TestServer::start();
    let mut c = s.client();
    // Holds `held` (declared) for about three seconds, by the server's clock.
    let lib = "#!lua name=hold\n\
        redis.register_function('hold', function(keys, args)\n\
          redis.call('set', keys[1], 'mine') local t0 = tonumber(redis.call('time')[1])\n\
          while tonumber(redis.call('time')[1]) < t0 + 3 do end return 'done' end)";
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "hold");
    let port = s.port;
    let holder = thread::spawn(move || {
        let mut c = kvik_testkit::connect(port);
        redis::cmd("FCALL")
            .arg("hold")
            .arg(1)
            .arg("held")
            .query::<String>(&mut c)
    });
    let running = eventually(Duration::from_secs(20), || {
        format!("{:?}", qv(&mut c, &["FUNCTION", "STATS"])).contains("hold")
    });
    assert!(running, "the holder never ran");
    // The holder may first be tried on an I/O thread and given up after its 2 ms budget there
    // (then a worker runs it from the start): until the worker holds `held`, the read finds
    // it free and unset.
    let mut refusal = String::new();
    let refused = eventually(Duration::from_secs(2), || {
        let read = command(&["EVAL", "return redis.call('get', 'held')", "0"]);
        match read.query::<Option<String>>(&mut c) {
            Ok(None) => false,
            Ok(Some(v)) => panic!("read {v} while the holder runs"),
            Err(e) => {
                refusal = e.to_string();
                true
            }
        }
    });
    assert!(refused, "the read of a held key never failed");
    assert!(refusal.contains("did not declare"), "{refusal}");
    assert_eq!(holder.join().unwrap().unwrap(), "done");
    // Once it is free, the same script works.
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return redis.call('get', 'held')", "0"]),
        "mine"
    );
}

/// Two lock libraries driven by Lua, unchanged: python-redis-lock (its release, extend and
/// reset are scripts) and redis-py's own `Lock` (release, extend, reacquire are scripts). Eight
/// threads increment a counter with a non-atomic read and write under the lock: the count is
/// exact only if the locks hold.
#[test]
fn lock_libraries_driven_by_lua_work() {
    let s = TestServer::start();
    let script = r#"
import sys, threading, redis, redis_lock
r = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
def work(kind):
    c = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
    for _ in range(25):
        lock = redis_lock.Lock(c, 'counter', expire=30) if kind == 'prl' else c.lock('pylock', timeout=30)
        with lock:
            key = 'n_' + kind
            v = int(c.get(key) or 0)
            c.set(key, v + 1)
threads = [threading.Thread(target=work, args=(k,)) for k in ['prl', 'py'] * 4]
for t in threads: t.start()
for t in threads: t.join()
print(int(r.get('n_prl')), int(r.get('n_py')))
l = redis_lock.Lock(r, 'x', expire=10)
assert l.acquire()
l.extend(expire=20)
print(r.ttl('lock:x') > 10, l.locked())
l.release()
print(l.locked())
m = r.lock('y', timeout=5)
assert m.acquire()
m.extend(10)
m.reacquire()
print(m.owned())
m.release()
print(m.locked())
redis_lock.Lock(r, 'z', expire=10).acquire()
redis_lock.reset_all(r)
print(r.exists('lock:z'))
"#;
    let Some(stdout) = kvik_testkit::python_stdout(script, &[&s.port.to_string()]) else {
        return;
    };
    assert_eq!(stdout, "100 100\nTrue True\nFalse\nTrue\nFalse\n0\n");
}

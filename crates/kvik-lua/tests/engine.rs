//! Engine behaviour that needs no redis-server: the sandbox, the script cache and its bound,
//! SCRIPT KILL through the interrupt hook, written-then-kill refusal, function libraries'
//! DUMP / RESTORE / DELETE, and flags exposed for the server.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kvik_lua::{
    errors, EvalEngine, FunctionEngine, Host, HostReply, LogLevel, RestorePolicy, RunContext,
    ScriptControl, ScriptFlags,
};
use kvik_resp::{Frame, Proto};

/// Answers every command with its own arguments as an array and counts writes on SET.
#[derive(Default)]
struct Echo {
    logs: Vec<(LogLevel, Vec<u8>)>,
}

impl Host for Echo {
    fn call(&mut self, args: Vec<Vec<u8>>, _resp: u8) -> HostReply {
        let wrote = args[0].eq_ignore_ascii_case(b"set");
        HostReply {
            frame: Frame::Array(args.iter().map(|a| Frame::Bulk(a.to_vec())).collect()),
            wrote,
        }
    }

    fn log(&mut self, level: LogLevel, message: &[u8]) {
        self.logs.push((level, message.to_vec()));
    }
}

fn eval(e: &mut EvalEngine, script: &str, args: &[&str]) -> String {
    let mut argv: Vec<&[u8]> = vec![script.as_bytes(), b"0"];
    argv.extend(args.iter().map(|a| a.as_bytes()));
    let mut out = Vec::new();
    let control = Arc::new(ScriptControl::default());
    e.eval(
        &argv,
        &mut RunContext::new(&mut Echo::default(), &control, Proto::Resp2, &mut out),
    );
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn sandbox_keeps_scripts_apart() {
    let mut e = EvalEngine::new();
    assert!(eval(&mut e, "x = 1", &[]).contains("Attempt to modify a readonly table"));
    assert!(eval(&mut e, "local t = table t.x = 1", &[]).contains("readonly"));
    assert!(eval(&mut e, "getmetatable('').__index = nil", &[]).contains("readonly"));
    assert!(eval(&mut e, "return loadstring('y = 2')()", &[]).contains("readonly"));
    assert_eq!(
        eval(&mut e, "return type(string.upper)", &[]),
        "$8\r\nfunction\r\n"
    );
    assert!(eval(&mut e, "return os.time()", &[]).contains("nonexistent global variable 'os'"));
    assert_eq!(
        eval(&mut e, "return redis.call('get', 'k', 1.5, 7)", &[]),
        "*4\r\n$3\r\nget\r\n$1\r\nk\r\n$3\r\n1.5\r\n$1\r\n7\r\n"
    );
}

#[test]
fn math_random_starts_like_redis() {
    // A fresh Redis 7.0 server answers 397 to its first math.random(1000).
    let mut e = EvalEngine::new();
    assert_eq!(eval(&mut e, "return math.random(1000)", &[]), ":397\r\n");
}

#[test]
fn redis_log_reaches_the_host() {
    let mut e = EvalEngine::new();
    let mut host = Echo::default();
    let control = Arc::new(ScriptControl::default());
    let mut out = Vec::new();
    e.eval(
        &[b"redis.log(redis.LOG_WARNING, 'a', 1, 'b')", b"0"],
        &mut RunContext::new(&mut host, &control, Proto::Resp2, &mut out),
    );
    assert_eq!(host.logs, vec![(LogLevel::Warning, b"a 1 b".to_vec())]);
}

#[test]
fn cache_is_bounded_but_keeps_loaded_scripts() {
    let mut e = EvalEngine::with_max_eval_scripts(3);
    let loaded = e.script_load(b"return 'kept'").unwrap();
    for i in 0..10 {
        e.prepare_eval(format!("return {i}").as_bytes()).unwrap();
    }
    assert!(e.len() <= 4);
    assert!(e.exists(loaded.as_bytes()));
    assert!(e.exists(loaded.to_uppercase().as_bytes()));
    assert_eq!(
        e.prepare_evalsha(kvik_lua::sha1_hex(b"return 0").as_bytes()),
        Err(errors::NOSCRIPT)
    );
    e.flush();
    assert!(e.is_empty());
}

#[test]
fn shebang_flags_are_exposed() {
    let mut e = EvalEngine::new();
    let sha = e
        .prepare_eval(b"#!lua flags=no-writes,allow-oom\nreturn 1")
        .unwrap();
    let f = e.flags(&sha).unwrap();
    assert!(f.contains(ScriptFlags::NO_WRITES | ScriptFlags::ALLOW_OOM));
    let sha = e.prepare_eval(b"return 1").unwrap();
    assert!(e
        .flags(&sha)
        .unwrap()
        .contains(ScriptFlags::EVAL_COMPAT_MODE));
}

/// Runs a busy loop on another thread, waits until it is busy, then kills it.
fn run_and_kill(script: &'static str, expect_kill: Result<(), &'static str>) -> String {
    let control = Arc::new(ScriptControl::new(Duration::from_millis(10)));
    let c2 = control.clone();
    let worker = thread::spawn(move || {
        let mut e = EvalEngine::new();
        let mut out = Vec::new();
        e.eval(
            &[script.as_bytes(), b"0"],
            &mut RunContext::new(&mut Echo::default(), &c2, Proto::Resp2, &mut out),
        );
        out
    });
    let start = Instant::now();
    while !control.is_busy() {
        assert!(start.elapsed() < Duration::from_secs(20), "never busy");
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(control.busy_error(), errors::BUSY_EVAL);
    if expect_kill.is_ok() {
        assert_eq!(control.kill(false), Err(errors::BUSY_EVAL));
    }
    assert_eq!(control.kill(true), expect_kill);
    let out = worker.join().unwrap();
    assert!(!control.is_running());
    String::from_utf8(out).unwrap()
}

#[test]
fn script_kill_stops_a_runaway_script() {
    // Redis 7.0.15's replies, taken from redis-server with busy-reply-threshold 100.
    for script in [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
    ] {
        let out = run_and_kill(script, Ok(()));
        assert_eq!(
            out,
            format!(
                "-ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:1.\r\n",
                kvik_lua::sha1_hex(script.as_bytes())
            )
        );
    }
}

#[test]
fn script_kill_refuses_after_a_write() {
    let out = run_and_kill(
        "redis.call('set', 'k', 'v') local t = redis.call('time') local n = 0 \
         while n < 5e7 do n = n + 1 end return 'done'",
        Err(errors::UNKILLABLE),
    );
    assert_eq!(out, "$4\r\ndone\r\n");
}

#[test]
fn function_libraries_dump_and_restore() {
    let mut f = FunctionEngine::new();
    let code = b"#!lua name=mylib\nredis.register_function{function_name='hello', callback=function(keys, args) return 'hi ' .. args[1] end, flags={'no-writes'}, description='greets'}";
    assert_eq!(f.load(code, false), Ok("mylib".into()));
    assert_eq!(
        f.load(code, false),
        Err("ERR Library 'mylib' already exists".into())
    );
    let info = f.function("hello").unwrap();
    assert!(info.flags.contains(ScriptFlags::NO_WRITES));
    assert_eq!(info.description.as_deref(), Some("greets"));
    let payload = f.dump();

    let mut g = FunctionEngine::new();
    g.restore(&payload, RestorePolicy::Append).unwrap();
    let control = Arc::new(ScriptControl::default());
    let mut out = Vec::new();
    g.fcall(
        &[b"hello", b"0", b"you"],
        &mut RunContext::new(&mut Echo::default(), &control, Proto::Resp3, &mut out),
    );
    assert_eq!(out, b"$6\r\nhi you\r\n");
    assert_eq!(
        g.restore(&payload, RestorePolicy::Append),
        Err("ERR Library 'mylib' already exists".into())
    );
    g.restore(&payload, RestorePolicy::Replace).unwrap();
    g.restore(&payload, RestorePolicy::Flush).unwrap();
    let mut bad = payload.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(
        g.restore(&bad, RestorePolicy::Flush),
        Err(errors::BAD_PAYLOAD.into())
    );
    assert_eq!(g.counts(), (1, 1));
    assert_eq!(g.delete("nosuch"), Err(errors::LIBRARY_NOT_FOUND));
    g.delete("mylib").unwrap();
    assert_eq!(g.counts(), (0, 0));
    let mut out = Vec::new();
    g.fcall(
        &[b"hello", b"0"],
        &mut RunContext::new(&mut Echo::default(), &control, Proto::Resp2, &mut out),
    );
    assert_eq!(out, b"-ERR Function not found\r\n");
}

#[test]
fn function_load_times_out() {
    let mut f = FunctionEngine::new();
    let err = f
        .load(
            b"#!lua name=slow\nlocal i = 0 while true do i = i + 1 end",
            false,
        )
        .unwrap_err();
    assert!(err.contains("FUNCTION LOAD timeout"), "{err}");
}

/// Not a test: the runtime's own cost per EVALSHA of a small script (one `redis.call` answered
/// by a host that does no work). Run with
/// `cargo test --release -p kvik-lua --test engine -- --ignored --nocapture evalsha_cost`.
#[test]
#[ignore]
fn evalsha_cost() {
    struct Nop;
    impl Host for Nop {
        fn call(&mut self, _: Vec<Vec<u8>>, _: u8) -> HostReply {
            Frame::Bulk(b"value".to_vec()).into()
        }
    }
    let mut e = EvalEngine::new();
    let sha = e.script_load(b"return redis.call('get', KEYS[1])").unwrap();
    let control = Arc::new(ScriptControl::default());
    let n = 200_000;
    let mut out = Vec::with_capacity(64);
    let start = Instant::now();
    for _ in 0..n {
        out.clear();
        e.run(
            &sha,
            &[b"k"],
            &[],
            &mut RunContext::new(&mut Nop, &control, Proto::Resp2, &mut out),
        );
    }
    let el = start.elapsed();
    println!("{}", String::from_utf8_lossy(&out));
    println!(
        "evalsha_cost: {n} runs in {el:?}: {:.0} runs/s, {:.2} us/run",
        n as f64 / el.as_secs_f64(),
        el.as_secs_f64() * 1e6 / n as f64
    );
}

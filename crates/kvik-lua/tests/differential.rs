//! Differential tests: the same scripts run by Debian's redis-server (EVAL / FCALL over a
//! socket) and by kvik-lua with a host that forwards every `redis.call` to that same
//! redis-server, so command replies are real. Replies are compared byte for byte in RESP2 and
//! RESP3. Each run starts from the same dataset (FLUSHALL + seed), so writes do not leak from
//! one side to the other.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use kvik_lua::{errors, EvalEngine, FunctionEngine, Host, HostReply, RunContext, ScriptControl};
use kvik_resp::{encode, parse_frame, Frame, Limits, Proto};
use kvik_testkit::{Endpoint, RedisServer};

/// A raw RESP connection: requests in, one reply's exact bytes out.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn open(server: &RedisServer, proto: Proto) -> Raw {
        let mut r = Raw {
            s: server.raw(),
            buf: Vec::new(),
        };
        if proto == Proto::Resp3 {
            r.request(&[b"HELLO", b"3"]);
        }
        r
    }

    fn request(&mut self, args: &[&[u8]]) -> (Vec<u8>, Frame) {
        let mut req = Vec::new();
        encode::command(&mut req, args);
        self.s.write_all(&req).expect("write");
        let limits = Limits::default();
        loop {
            if let Some((frame, used)) = parse_frame(&self.buf, &limits).expect("valid RESP") {
                let bytes = self.buf.drain(..used).collect();
                return (bytes, frame);
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "redis-server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Forwards `redis.call` to redis-server on the connection of the script's protocol, turning
/// the client-side errors Redis words differently for scripts into the script wording (what
/// the kvik server does from its command table).
struct Forward {
    r2: Raw,
    r3: Raw,
    calls: usize,
}

impl Host for Forward {
    fn call(&mut self, args: Vec<Vec<u8>>, resp: u8) -> HostReply {
        self.calls += 1;
        let conn = if resp == 3 {
            &mut self.r3
        } else {
            &mut self.r2
        };
        if NOSCRIPT_COMMANDS
            .iter()
            .any(|c| c.as_bytes().eq_ignore_ascii_case(&args[0]))
        {
            return Frame::Error(errors::NOT_ALLOWED.into()).into();
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let (_, frame) = conn.request(&refs);
        let frame = match frame {
            Frame::Error(e) if e.starts_with("ERR unknown command") => {
                Frame::Error(errors::UNKNOWN_COMMAND.into())
            }
            Frame::Error(e) if e.starts_with("ERR wrong number of arguments") => {
                Frame::Error(errors::WRONG_ARITY.into())
            }
            f => f,
        };
        HostReply {
            frame,
            wrote: false,
        }
    }
}

/// Commands Redis refuses inside scripts (flag `noscript`), a sample.
const NOSCRIPT_COMMANDS: &[&str] = &["hello", "multi", "exec", "subscribe", "watch", "eval"];

struct Bench {
    _server: RedisServer,
    admin: Raw,
    client2: Raw,
    client3: Raw,
    host: Forward,
    control: Arc<ScriptControl>,
    failures: Vec<String>,
}

impl Bench {
    fn new() -> Bench {
        let server = RedisServer::start(&[]);
        let b = Bench {
            admin: Raw::open(&server, Proto::Resp2),
            client2: Raw::open(&server, Proto::Resp2),
            client3: Raw::open(&server, Proto::Resp3),
            host: Forward {
                r2: Raw::open(&server, Proto::Resp2),
                r3: Raw::open(&server, Proto::Resp3),
                calls: 0,
            },
            control: Arc::new(ScriptControl::default()),
            failures: Vec::new(),
            _server: server,
        };
        // The redis crate also reaches the same server (used here only to check it is up).
        let mut con = b._server.client();
        let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
        assert_eq!(pong, "PONG");
        b
    }

    fn seed(&mut self) {
        for cmd in [
            &[&b"FLUSHALL"[..]][..],
            &[b"SET", b"s", b"hello"],
            &[b"SET", b"n", b"10"],
            &[b"HSET", b"h", b"a", b"1"],
            &[b"RPUSH", b"l", b"x", b"y", b"z"],
            &[b"SADD", b"set", b"m"],
            &[b"ZADD", b"z", b"1.5", b"a"],
        ] {
            self.admin.request(cmd);
        }
    }

    fn check(&self) {
        assert!(
            self.failures.is_empty(),
            "{} mismatches:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }

    fn client(&mut self, proto: Proto) -> &mut Raw {
        match proto {
            Proto::Resp2 => &mut self.client2,
            Proto::Resp3 => &mut self.client3,
        }
    }

    /// EVAL `script` with `keys`/`args` on both sides in both protocols; asserts equal bytes.
    fn eval(&mut self, engine: &mut EvalEngine, script: &str, keys: &[&str], args: &[&str]) {
        let n = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![script.as_bytes(), n.as_bytes()];
        argv.extend(keys.iter().map(|k| k.as_bytes()));
        argv.extend(args.iter().map(|a| a.as_bytes()));
        self.eval_argv(engine, &argv, script);
    }

    fn eval_argv(&mut self, engine: &mut EvalEngine, argv: &[&[u8]], label: &str) {
        for proto in [Proto::Resp2, Proto::Resp3] {
            self.seed();
            let mut req: Vec<&[u8]> = vec![b"EVAL"];
            req.extend_from_slice(argv);
            let (want, _) = self.client(proto).request(&req);
            self.seed();
            let mut got = Vec::new();
            engine.eval(
                argv,
                &mut RunContext::new(&mut self.host, &self.control, proto, &mut got),
            );
            if got != want {
                self.failures.push(format!(
                    "{proto:?}: {label}\n  kvik:  {:?}\n  redis: {:?}",
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                ));
            }
        }
    }
}

const CONVERSIONS: &[&str] = &[
    "return 1",
    "return 3.99",
    "return -3.99",
    "return 1e20",
    "return 0/0",
    "return 'x'",
    "return ''",
    "return nil",
    "return true",
    "return false",
    "return {}",
    "return {1, 2, {3, 'x', {}}}",
    "return {1, nil, 3}",
    "return {1, false, 3}",
    "return {ok = 'fine'}",
    "return {ok = 'a\\r\\nb'}",
    "return {err = 'My Error'}",
    "return {err = 'x'}",
    "return {err = ''}",
    "return {double = 3.14}",
    "return {double = 1/0}",
    "return {double = 0.1}",
    "return {big_number = '123456789012345678901234567890'}",
    "return {map = {a = 1}}",
    "return {set = {a = true}}",
    "return {verbatim_string = {format = 'txt', string = 'hello'}}",
    "redis.setresp(3) return {true, false}",
    "redis.setresp(3) return redis.call('hgetall', 'h')",
    "redis.setresp(3) return redis.call('smembers', 'set')",
    "redis.setresp(3) return redis.call('zscore', 'z', 'a')",
    "redis.setresp(3) return type(redis.call('get', 'nokey'))",
    "redis.setresp(3) local r = redis.call('hgetall', 'h') return r.map.a",
    "redis.setresp(3) local r = redis.call('zscore', 'z', 'a') return r.double * 2",
    "redis.setresp(3) return redis.call('hello')",
    "redis.setresp(3) return redis.call('info', 'keyspace')",
    "redis.setresp(3) local r = redis.call('info', 'keyspace') return r.verbatim_string.format",
    "redis.setresp(3) return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "redis.setresp(3) return redis.pcall('hget', 's', 'f')",
    "redis.setresp(3) return {redis.call('exists', 's'), redis.call('get', 'nokey'), 'after'}",
    "redis.setresp(3) return {map = {a = {set = {x = true}}, b = {double = 2.5}}}",
    "return xpcall(function() error('in x') end, function(e) return 'handled: ' .. e end)",
    "local ok, e = pcall(cjson.decode, '[') return e",
    "local ok, e = pcall(redis.error_reply) return {tostring(ok), e.err}",
    "return redis.call('get', 's')",
    "return redis.call('get', 'nokey')",
    "return type(redis.call('get', 'nokey'))",
    "return redis.call('lrange', 'l', 0, -1)",
    "return redis.call('incr', 'n')",
    "return redis.call('set', 'k', 'v')",
    "return redis.call('set', 'k', 1.5)",
    "redis.call('set', 'k', 0.1) return redis.call('get', 'k')",
    "redis.call('set', 'k', 1e20) return redis.call('get', 'k')",
    "redis.call('set', 'k', 123456789) return redis.call('get', 'k')",
    "redis.call('set', 'k', 1e17) return redis.call('get', 'k')",
    "redis.call('set', 'k', 2^53) return redis.call('get', 'k')",
    "redis.call('set', 'k', -1e16) return redis.call('get', 'k')",
    "return {tostring(1e15), tostring(2^53), 1e15 .. ''}",
    "return cjson.encode({1e15, 2^53, -1e17})",
    "return struct.pack('d', 2^53)",
    "return redis.call('hgetall', 'h')",
    "return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "return redis.call('ping')",
    "return redis.call('type', 's')",
    "return {redis.call('get', 'nokey'), 1}",
    "return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV",
    "return {KEYS, ARGV}",
    "KEYS[1] = 'changed' return KEYS[1]",
    "return redis.status_reply('FINE')",
    "return redis.error_reply('x')",
    "return redis.error_reply('-x')",
    "return redis.error_reply('MY x y')",
    "return redis.error_reply(1)",
    "return redis.status_reply()",
    "return redis.sha1hex('')",
    "return redis.sha1hex('abc')",
    "return {redis.REDIS_VERSION_NUM >= 0x070000, redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return {redis.REPL_ALL, redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA}",
    "return redis.set_repl(redis.REPL_ALL)",
    "return redis.replicate_commands()",
    "return redis.breakpoint()",
    "return redis.debug('x')",
    "return redis.log(redis.LOG_WARNING, 'from a test')",
    "math.randomseed(42) return {math.random(1000), math.random(1000)}",
    "return tostring(1/3)",
    "return string.format('%5.2f|%d|%s', 3.14159, 42, 'x')",
    "return table.concat({1, 2, 3}, ',')",
    "return #string.rep('a', 10)",
    "return ('abc'):upper()",
    "return getmetatable('').__index == string",
    "return type(getmetatable(_G))",
    "return rawget(_G, 'nothere') == nil",
    "local n = 0 for k, v in pairs(_G) do n = n + 1 end return n > 10",
    "return loadstring('return 1 + 1')()",
    "return select('#', 1, 2, 3)",
    "return unpack({1, 2, 3})",
    "return coroutine.wrap(function() coroutine.yield(7) end)()",
    "local ok, e = pcall(function() error('inner') end) return e",
    "local ok, e = pcall(function() error({err = 'tbl'}) end) return e.err",
];

/// Sandbox corners where kvik's read-only proxies must look like Redis's read-only tables.
const SANDBOX: &[&str] = &[
    "return #_G",
    "return next(_G) ~= nil",
    "local n = 0 for k in pairs(string) do n = n + 1 end return n",
    "local n = 0 for k in pairs(redis) do n = n + 1 end return n",
    "return rawequal(_G, _G._G)",
    "return type(_G._G)",
    "return rawget(string, 'upper') ~= nil",
    "return rawget(_G, 'redis') == redis",
    "return redis",
    "return {string.byte('abc', 1, -1)}",
    "return gcinfo() > 0",
    "return collectgarbage('count') > 0",
    "return 'a\\0b'",
    "return #string.rep('x', 100000)",
    "return {2^63, -2^63, 0.5, -0.5, 2^53 + 1}",
    "return coroutine.wrap(function() error('in co') end)()",
    "local co = coroutine.create(function() error('in co') end) return {coroutine.resume(co)}",
    "error('lvl2', 2)",
    "local function f() error('deep') end local function g() f() end g()",
    "local t = setmetatable({}, {__index = function(t, k) return k .. '!' end}) return t.x",
    "return ipairs(KEYS) ~= nil",
    "return select(2, pcall(error))",
    "return select(2, pcall())",
    "return tostring(nil) .. tostring(true)",
    "return tonumber('0x10') + tonumber(' 5 ')",
    "return string.format('%q', 'a\\nb')",
    "return table.concat({}, ',')",
    "local t = {} table.insert(t, 'a') table.insert(t, 1, 'b') return t",
    "local t = {3, 1, 2} table.sort(t) return t",
    "return math.floor(-3.5) .. ' ' .. math.fmod(7, 3) .. ' ' .. math.max(1, 5, 3)",
    "return string.gsub('hello world', 'o', '0')",
    "return {string.find('hello', 'l+')}",
    "return string.sub('hello', 2, -2)",
    "return loadstring('syntax error here')",
    "return {loadstring('syntax error here')}",
    "local f = loadstring('return ...') return f(1, 2)",
    "return unpack({1, 2, nil, 4})",
    "return {unpack({1, 2, nil, 4})}",
    "local ok, e = coroutine.resume(coroutine.create(function() cjson.decode('x') end)) return e",
    "return xpcall(function() cjson.decode('x') end, function(e) return 'got: ' .. e end)",
    "return xpcall(function() redis.call('incr', 's') end, function(e) return e.err end)",
    "local f = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end) return {f(1), f(5)}",
    "table.insert(_G, 1)",
    "table.insert(string, 'x')",
    "return table.insert({}, 1, 2, 3)",
    "return table.insert(nil, 1)",
    "return table.insert({}, 'x', 1)",
    "local t = {1, 2, 3} table.insert(t, 2, 'x') return t",
    "local t = {1, 2, 3} table.insert(t, 6, 'x') return {t[4], t[5], t[6], #t}",
    "local t = {} table.insert(t, 'a') table.insert(t, 'b') return t",
    "return table.remove(_G)",
    "table.sort(_G)",
];

const ERRORS: &[&str] = &[
    "return error('My Error')",
    "error({err = 'boom'})",
    "return error()",
    "error('a\\nb')",
    "x = 1",
    "return undefinedvar",
    "return _G.undefinedvar",
    "string.x = 1",
    "redis.x = 1",
    "cjson.x = 1",
    "rawset(_G, 'x', 1)",
    "setmetatable(_G, {})",
    "return nil + 1",
    "local function f() return nil .. 'x' end return f()",
    "return redis.call('incr', 's')",
    "local function f() return redis.call('incr', 's') end\nreturn f()",
    "return redis.pcall('incr', 's')",
    "return redis.pcall('incr', 's')['ignore_error_stats_update']",
    "local ok, e = pcall(redis.call, 'incr', 's') return {tostring(ok), e.err}",
    "return redis.call()",
    "return redis.pcall()",
    "return redis.call({})",
    "return redis.call('get', true)",
    "return redis.pcall('get', nil)",
    "return redis.call('nosuchcommand')",
    "return redis.pcall('nosuchcommand')",
    "return redis.call('get')",
    "return redis.pcall('get', 'a', 'b')",
    "return redis.call('hget', 's', 'f')",
    "return redis.sha1hex()",
    "return redis.log()",
    "return redis.log('x', 'y')",
    "return redis.log(99, 'y')",
    "return redis.setresp()",
    "return redis.setresp(4)",
    "return redis.set_repl()",
    "return redis.set_repl(99)",
    "return print",
    "return os",
    "return io",
    "return loadfile",
    "return dofile",
    "return require",
    "return debug",
    "return math.random(0)",
    "return math.random(5, 1)",
    "return math.random(1, 2, 3)",
    "return math.random('x')",
    "return string.rep()",
    "return +",
    "return 'unfinished",
    "#!lua\nreturn 1",
    "#!lua flags=no-writes\nreturn 2",
    "#!lua flags=no-writes,allow-oom\nreturn redis.call('get', 's')",
    "#!lua flags=bogus\nreturn 1",
    "#!lua x=1\nreturn 1",
    "#!lua",
    "#!python\nreturn 1",
    "#!lua\nreturn error('on line two')",
];

const LIBS: &[&str] = &[
    "return cjson.encode({1, 2, 3})",
    "return cjson.encode({a = 1})",
    "return cjson.encode({})",
    "return cjson.encode({1, 'x/y', 0.1, 1e20, -0.5, 3, true, false})",
    "return cjson.encode('a\"b\\\\c\\n\\t\\1\\127')",
    "return cjson.encode({[1] = 1, [2] = 2, [4] = 4})",
    "return cjson.encode({[1] = 1, [20] = 2})",
    "return cjson.encode({[1.5] = 1})",
    "return cjson.encode({[3] = 'x'})",
    "return cjson.encode(cjson.null)",
    "return cjson.encode({a = {b = {c = {1, 2}}}})",
    "return cjson.encode(1/3)",
    "return cjson.encode(1/0)",
    "return cjson.encode(function() end)",
    "return cjson.encode({[true] = 1})",
    "return cjson.encode()",
    "return cjson.decode('[1,2,3]')",
    "return cjson.decode('{\"a\":[1,{\"b\":2}]}').a[2].b",
    "return cjson.decode('\"\\\\u00e9\\\\n\"')",
    "return cjson.decode('\"\\\\ud83d\\\\ude00\"')",
    "return cjson.decode('1.5e3')",
    "return cjson.decode('-0.5')",
    "return cjson.decode('null') == cjson.null",
    "return type(cjson.decode('[null]')[1])",
    "return cjson.decode('true')",
    "return cjson.decode('[1,2')",
    "return cjson.decode('{\"a\" 1}')",
    "return cjson.decode('{1:2}')",
    "return cjson.decode('[1,]')",
    "return cjson.decode('nul')",
    "return cjson.decode('')",
    "return cjson.decode('\"abc')",
    "return cjson.decode('\"\\\\x\"')",
    "return cjson.decode('[1] x')",
    "return cjson.decode('{\"a\":1,}')",
    "return cjson.encode(cjson.decode('{\"k\":[1,2,{\"x\":null}],\"s\":\"\\\\/\"}'))",
    "return cmsgpack.pack(1, -1, 127, 128, 255, 256, 65535, 65536, -32, -33, -128, -129, -32768, -32769)",
    "return cmsgpack.pack(4294967295, 4294967296, -2147483648, -2147483649)",
    "return cmsgpack.pack(1.5, 0.1, 1/0, -1/0)",
    "return cmsgpack.pack('', 'abc', string.rep('x', 31), string.rep('x', 32), string.rep('x', 256))",
    "return cmsgpack.pack({}, {1, 2, 3}, {a = 1}, {1, nil, 3}, true, false)",
    "return cmsgpack.pack(string.rep('y', 70000))",
    "return cmsgpack.pack({{{{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}}})",
    "return cmsgpack.pack()",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, {k = 'v'}))}",
    "local t = cmsgpack.unpack(cmsgpack.pack({a = {1, 2}})) return t.a[2]",
    "return {cmsgpack.unpack(cmsgpack.pack(0.1, -5.5, 1e300))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 2)}",
    "return cmsgpack.unpack('\\145')",
    "return cmsgpack.unpack('\\193')",
    "return cmsgpack.unpack('\\205\\1')",
    "return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0)}",
    "return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8)}",
    "return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5)}",
    "return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(1, 10)}",
    "return {bit.bswap(0x12345678), bit.band(), bit.lshift(1, 33)}",
    "return bit.band('x')",
    "return bit.bor(1, {})",
    "return {bit.band('255', 15)}",
    "return struct.pack('>I4', 1)",
    "return struct.pack('<i2 >h B b', -2, -2, 255, -1)",
    "return struct.pack('!4 b i4 d', 1, 2, 0.5)",
    "return struct.pack('s c3 c0', 'ab', 'xyz', 'tail')",
    "return struct.pack('f d', 1.5, 0.1)",
    "return struct.pack('l L T', -1, 1, 2)",
    "return struct.pack('x x I1', 7)",
    "return {struct.unpack('>I4 <i2 B', struct.pack('>I4 <i2 B', 1, -3, 200))}",
    "return {struct.unpack('s c2', 'hello\\0ab')}",
    "return {struct.unpack('b c0', struct.pack('b c0', 3, 'xyz'))}",
    "return {struct.unpack('>i4', struct.pack('>i4', -100), 1)}",
    "return {struct.unpack('f', struct.pack('f', 0.25))}",
    "return {struct.size('i4 d !8 b d'), struct.size('>i2'), struct.size('c10')}",
    "return struct.pack('z', 1)",
    "return struct.pack('i4')",
    "return struct.pack('i40', 1)",
    "return struct.unpack('i4', 'ab')",
    "return struct.unpack('s', 'abc')",
    "return struct.size('s')",
    "return struct.pack('c5', 'ab')",
    "local t = {} local c = t for i = 1, 1100 do c[1] = {} c = c[1] end return cjson.encode(t)",
    "return cjson.decode(string.rep('[', 1100) .. string.rep(']', 1100))",
    "return #cjson.encode(cjson.decode(string.rep('[', 900) .. string.rep(']', 900)))",
    "return cjson.decode('[1e400, -1e400]')[1] > 0",
    "return cjson.decode('0x10')",
    "return cjson.decode('01')",
    "return cjson.decode('[\"a\\u0000b\"]')[1]",
    "return cjson.encode({['a\\0b'] = 1})",
    "return cjson.encode({[-1] = 'neg'})",
    "return cjson.encode({[0] = 'zero'})",
    "return cjson.encode(string.rep('\\200', 3))",
    "return {cjson.encode_sparse_array()}",
    "return cjson.encode_number_precision()",
    "return cjson.encode_max_depth()",
    "return {struct.pack('i8', -2), struct.pack('I3', 70000), struct.pack('>i16', -1)}",
    "return {struct.unpack('i8', struct.pack('i8', -2))}",
    "return {struct.unpack('>I3 <I3', '\\1\\2\\3\\1\\2\\3')}",
    "return struct.unpack('i4', 'abcd', 0)",
    "return {struct.unpack('b', 'abc', 3)}",
    "return {cmsgpack.unpack(cmsgpack.pack(-0.0, 2^53, -2^63, 2^64))}",
    "return cmsgpack.pack({[1] = 'a', [3] = 'c'})",
    "return cmsgpack.pack({[1.5] = 'x'})",
    "return {cmsgpack.unpack('\\146\\1')}",
    "return {bit.tobit(2^52), bit.tobit(-2^31), bit.tobit(2^31), bit.band(2^40 + 3, 7)}",
];

#[test]
fn eval_matches_redis_server() {
    let mut b = Bench::new();
    let mut engine = EvalEngine::new();
    for script in CONVERSIONS.iter().chain(SANDBOX).chain(ERRORS).chain(LIBS) {
        b.eval(&mut engine, script, &["key1"], &["arg1", "arg2"]);
    }
    assert!(b.host.calls > 0);
    b.check();
}

#[test]
fn eval_argument_errors_match() {
    let mut b = Bench::new();
    let mut engine = EvalEngine::new();
    for argv in [
        &[&b"return 1"[..], b"2", b"k"][..],
        &[b"return 1", b"-1"],
        &[b"return 1", b"x"],
        &[b"return 1", b"0"],
        &[b"return {KEYS[1], ARGV[1]}", b"1", b"a", b"b"],
    ] {
        b.eval_argv(&mut engine, argv, &String::from_utf8_lossy(argv[1]));
    }
    b.check();
}

#[test]
fn evalsha_and_script_load_match() {
    let mut b = Bench::new();
    let mut engine = EvalEngine::new();
    let body = "return ARGV[1] .. '!'";
    let (want, _) = b.admin.request(&[b"SCRIPT", b"LOAD", body.as_bytes()]);
    let sha = engine.script_load(body.as_bytes()).expect("loads");
    let mut got = Vec::new();
    encode::bulk(&mut got, sha.as_bytes());
    assert_eq!(got, want);
    for proto in [Proto::Resp2, Proto::Resp3] {
        for sha_arg in [
            sha.clone(),
            sha.to_uppercase(),
            "0".repeat(40),
            "abc".into(),
        ] {
            let argv: Vec<&[u8]> = vec![sha_arg.as_bytes(), b"0", b"hi"];
            let mut req: Vec<&[u8]> = vec![b"EVALSHA"];
            req.extend_from_slice(&argv);
            let (want, _) = b.client(proto).request(&req);
            let mut got = Vec::new();
            engine.evalsha(
                &argv,
                &mut RunContext::new(&mut b.host, &b.control, proto, &mut got),
            );
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{sha_arg}"
            );
        }
    }
    let (want, _) = b.admin.request(&[b"SCRIPT", b"LOAD", b"return +"]);
    let got = engine.script_load(b"return +").unwrap_err();
    assert_eq!(String::from_utf8_lossy(&want).trim_end(), format!("-{got}"));
}

/// A small deterministic generator for the random script test (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Command templates for random scripts: `{v}` is a random value argument.
const TEMPLATES: &[&str] = &[
    "'set', KEYS[1], {v}",
    "'get', KEYS[1]",
    "'get', 'nokey'",
    "'incr', 'n'",
    "'incrbyfloat', 'n', {v}",
    "'append', 's', {v}",
    "'hset', 'h', {v}, {v}",
    "'hgetall', 'h'",
    "'hget', 's', 'f'",
    "'rpush', 'l', {v}",
    "'lrange', 'l', 0, -1",
    "'lpop', 'l'",
    "'sadd', 'set', {v}",
    "'smembers', 'set'",
    "'sismember', 'set', 'm'",
    "'zadd', 'z', {v}, 'm2'",
    "'zrange', 'z', 0, -1, 'withscores'",
    "'zscore', 'z', 'a'",
    "'del', 's'",
    "'exists', 's', 'n'",
    "'type', 'h'",
    "'strlen', 's'",
    "'expire', 's', 100",
    "'ttl', 'nokey'",
    "'ping'",
    "'echo', {v}",
    "'incr', 's'",
    "'nosuch', 1",
];

const VALUES: &[&str] = &[
    "1", "-7", "1.5", "0.1", "1e20", "'x'", "''", "'10'", "'a b'", "ARGV[1]", "3.0",
];

fn random_script(rng: &mut Rng) -> String {
    let mut s = String::new();
    if rng.next() % 3 < 1 {
        s.push_str("redis.setresp(3) ");
    }
    let n = 1 + rng.next() % 4;
    let mut names = Vec::new();
    for i in 0..n {
        let mut cmd = rng.pick(TEMPLATES).to_string();
        while let Some(at) = cmd.find("{v}") {
            let v = rng.pick(VALUES);
            cmd.replace_range(at..at + 3, v);
        }
        let f = if rng.next() & 1 == 0 { "pcall" } else { "call" };
        s.push_str(&format!("local r{i} = redis.{f}({cmd}) "));
        names.push(format!("r{i}"));
    }
    match rng.next() % 4 {
        0 => s.push_str(&format!("return {}", names.last().expect("one"))),
        1 => s.push_str(&format!("return {{{}}}", names.join(", "))),
        2 => s.push_str(&format!("return {{type({}), 'end'}}", names[0])),
        _ => s.push_str(&format!(
            "return cjson.encode({{ok = type({0}) ~= 'table' and {0} or 'tbl'}})",
            names[0]
        )),
    }
    s
}

#[test]
fn random_scripts_match() {
    let mut b = Bench::new();
    let mut engine = EvalEngine::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..300 {
        let script = random_script(&mut rng);
        b.eval(&mut engine, &script, &["rk"], &["av"]);
    }
    b.check();
}

fn frame_of(r: Result<String, String>) -> Vec<u8> {
    let mut out = Vec::new();
    match r {
        Ok(name) => encode::bulk(&mut out, name.as_bytes()),
        Err(e) => encode::error(&mut out, e.as_bytes()),
    }
    out
}

const LIBRARIES: &[&str] = &[
    "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return {keys[1], args[1], #keys, #args} end)",
    "#!lua name=lib1\nredis.register_function('other', function() return 1 end)",
    "#!lua name=lib2\nredis.register_function{function_name='f2', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}",
    "#!lua name=lib3\nredis.register_function('f1', function() return 1 end)",
    "#!lua name=lib4\nlocal x = 1",
    "#!lua name=lib5\nredis.register_function('bad-name', function() end)",
    "#!lua name=lib6\nredis.register_function('f6')",
    "#!lua name=lib7\nredis.register_function{function_name='f7', callback=function() end, flags={'bogus'}}",
    "#!lua name=lib8\nredis.register_function{function_name='f8', callback=function() end, what=1}",
    "#!lua name=lib9\nreturn +",
    "#!lua name=lib10\nerror('load failed')",
    "#!lua name=bad-lib\nredis.register_function('f', function() end)",
    "#!lua\nredis.register_function('f', function() end)",
    "#!py name=x\nredis.register_function('f', function() end)",
    "#!lua name=a name=b\n",
    "#!lua name=lib11 foo=bar\n",
    "redis.register_function('f', function() end)",
    "#!lua name=LIB1\nredis.register_function('g', function() return 1 end)",
    "#!lua name=libcase\nredis.register_function('F1', function() return 1 end)",
    "#!lua name=libhh\nredis.register_function('h', function() return 'lower' end) redis.register_function('hx', function() return 1 end)",
    "#!lua name=lib12\nredis.register_function('f12', function() return redis.call('incr', 's') end) redis.register_function('f13', function() error('in function') end) redis.register_function('f14', function() return redis.register_function('x', function() end) end)",
];

#[test]
fn functions_match_redis_server() {
    let mut b = Bench::new();
    let mut engine = FunctionEngine::new();
    b.admin.request(&[b"FUNCTION", b"FLUSH"]);
    for code in LIBRARIES {
        let (want, _) = b.admin.request(&[b"FUNCTION", b"LOAD", code.as_bytes()]);
        let got = frame_of(engine.load(code.as_bytes(), false));
        if got != want {
            b.failures.push(format!(
                "LOAD {code}\n  kvik:  {:?}\n  redis: {:?}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            ));
        }
    }
    let replace = LIBRARIES[1];
    let (want, _) = b
        .admin
        .request(&[b"FUNCTION", b"LOAD", b"REPLACE", replace.as_bytes()]);
    let got = frame_of(engine.load(replace.as_bytes(), true));
    assert_eq!(got, want);
    let reload = LIBRARIES[0];
    let (want, _) = b
        .admin
        .request(&[b"FUNCTION", b"LOAD", b"REPLACE", reload.as_bytes()]);
    assert_eq!(frame_of(engine.load(reload.as_bytes(), true)), want);
    let calls: &[&[&[u8]]] = &[
        &[b"f1", b"1", b"k", b"a"],
        &[b"f2", b"1", b"s"],
        &[b"f12", b"0"],
        &[b"f13", b"0"],
        &[b"f14", b"0"],
        &[b"nosuch", b"0"],
        &[b"f1", b"5"],
        &[b"f1", b"-1"],
        &[b"f1", b"x"],
        &[b"F1", b"0"],
    ];
    for argv in calls {
        for proto in [Proto::Resp2, Proto::Resp3] {
            b.seed();
            let mut req: Vec<&[u8]> = vec![b"FCALL"];
            req.extend_from_slice(argv);
            let (want, _) = b.client(proto).request(&req);
            b.seed();
            let mut got = Vec::new();
            engine.fcall(
                argv,
                &mut RunContext::new(&mut b.host, &b.control, proto, &mut got),
            );
            if got != want {
                b.failures.push(format!(
                    "{proto:?} FCALL {:?}\n  kvik:  {:?}\n  redis: {:?}",
                    String::from_utf8_lossy(&argv.concat()),
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                ));
            }
        }
    }
    for proto in [Proto::Resp2, Proto::Resp3] {
        // One library with one function: Redis lists in hash order, kvik sorted.
        for pattern in [&b"lib2"[..], b"LIB2", b"l?b2"] {
            let (want, _) =
                b.client(proto)
                    .request(&[b"FUNCTION", b"LIST", b"LIBRARYNAME", pattern]);
            let mut got = Vec::new();
            engine
                .list(Some(pattern), false)
                .encode_with(&mut got, proto);
            if got != want {
                b.failures.push(format!(
                    "{proto:?} FUNCTION LIST {}\n  kvik:  {:?}\n  redis: {:?}",
                    String::from_utf8_lossy(pattern),
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                ));
            }
        }
    }
    for proto in [Proto::Resp2, Proto::Resp3] {
        let (want, _) = b.client(proto).request(&[b"FUNCTION", b"STATS"]);
        let mut got = Vec::new();
        engine.stats(None).encode_with(&mut got, proto);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{proto:?} FUNCTION STATS"
        );
    }
    let (want, _) = b.admin.request(&[b"FUNCTION", b"DELETE", b"nosuch"]);
    let mut got = Vec::new();
    encode::error(&mut got, engine.delete("nosuch").unwrap_err().as_bytes());
    assert_eq!(got, want);
    b.check();
}

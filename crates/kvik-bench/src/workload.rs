//! What a test sends: the redis-benchmark test table, kvik-bench's additions (MGET, HGET, the
//! read:write mix), arbitrary commands, key numbers drawn from a distribution, and the RESP
//! encoding of one request.
//!
//! A [`Test`] is one or more weighted [`Op`]s; an op is a command template whose arguments are
//! literals, a value of the configured size, or text with `__rand_int__` placeholders. Each
//! placeholder gets its own key number, written as 12 zero-padded digits like
//! redis-benchmark's; without `-r` the placeholder stays literally in the key, as there.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::args::{Config, Dist, Values};

const PLACEHOLDER: &[u8] = b"__rand_int__";

/// One argument of a command template.
#[derive(Clone, Debug)]
pub enum Arg {
    /// Sent as is.
    Lit(Vec<u8>),
    /// Text split at each `__rand_int__`: parts[0] NUM parts[1] NUM ... parts[n].
    Rand(Vec<Vec<u8>>),
    /// A value of the configured size (`-d`).
    Data,
}

/// One command template.
#[derive(Clone, Debug)]
pub struct Op {
    /// Its name in reports (GET, SET, ...).
    pub name: String,
    pub args: Vec<Arg>,
    /// Sent inline (`PING\r\n`) instead of as a multibulk.
    pub inline: bool,
    /// Indices of the arguments that are keys (cluster routing uses the first).
    pub keys: Vec<usize>,
}

/// A test: weighted ops, reported under one name (and per op when there are several).
#[derive(Clone, Debug)]
pub struct Test {
    pub name: String,
    pub ops: Vec<(Op, u32)>,
}

fn split_rand(s: &[u8], random: bool) -> Arg {
    if !random || memchr::memmem::find(s, PLACEHOLDER).is_none() {
        return Arg::Lit(s.to_vec());
    }
    let mut parts = Vec::new();
    let mut rest = s;
    while let Some(i) = memchr::memmem::find(rest, PLACEHOLDER) {
        parts.push(rest[..i].to_vec());
        rest = &rest[i + PLACEHOLDER.len()..];
    }
    parts.push(rest.to_vec());
    Arg::Rand(parts)
}

/// Builds an op from words: `"SET key:__rand_int__ $data"`; `$data` is the value argument.
fn op(name: &str, words: &str, random: bool, keys: Vec<usize>) -> Op {
    let args = words
        .split(' ')
        .map(|w| match w {
            "$data" => Arg::Data,
            w => split_rand(w.as_bytes(), random),
        })
        .collect();
    Op {
        name: name.to_string(),
        args,
        inline: false,
        keys,
    }
}

fn multi(name: &str, cmd: &str, n: usize, with_data: bool, random: bool) -> Op {
    let mut words = cmd.to_string();
    let mut keys = Vec::new();
    for i in 0..n {
        words.push_str(" key:__rand_int__");
        keys.push(1 + i * if with_data { 2 } else { 1 });
        if with_data {
            words.push_str(" $data");
        }
    }
    op(name, &words, random, keys)
}

/// The tests a configuration runs, in redis-benchmark's order.
pub fn tests_for(cfg: &Config) -> Vec<Test> {
    let random = cfg.keyspace.is_some();
    if !cfg.command.is_empty() {
        let args: Vec<Arg> = cfg
            .command
            .iter()
            .map(|a| split_rand(a.as_bytes(), random))
            .collect();
        let keys = if args.len() > 1 { vec![1] } else { vec![] };
        let name = cfg.command.join(" ");
        let o = Op {
            name: name.clone(),
            args,
            inline: false,
            keys,
        };
        return vec![Test {
            name,
            ops: vec![(o, 1)],
        }];
    }
    let n = cfg.keys;
    if let Some((r, w)) = cfg.ratio {
        let n = cfg.mix_keys;
        let (read, write) = if n > 1 {
            (
                multi("MGET", "MGET", n, false, random),
                multi("MSET", "MSET", n, true, random),
            )
        } else {
            (
                op("GET", "GET key:__rand_int__", random, vec![1]),
                op("SET", "SET key:__rand_int__ $data", random, vec![1]),
            )
        };
        let name = format!("{}/{} {r}:{w}", read.name, write.name);
        let ops = [(read, r), (write, w)]
            .into_iter()
            .filter(|(_, w)| *w > 0)
            .collect();
        return vec![Test { name, ops }];
    }
    let lpush = || op("LPUSH", "LPUSH mylist $data", random, vec![1]);
    let lrange = |k: u32| {
        (
            format!("LRANGE_{k} (first {k} elements)"),
            op(
                "LRANGE",
                &format!("LRANGE mylist 0 {}", k - 1),
                random,
                vec![1],
            ),
        )
    };
    let mut all: Vec<(&str, String, Op)> = vec![
        (
            "ping_inline",
            "PING_INLINE".into(),
            Op {
                name: "PING_INLINE".into(),
                args: vec![Arg::Lit(b"PING".to_vec())],
                inline: true,
                keys: vec![],
            },
        ),
        (
            "ping_mbulk",
            "PING_MBULK".into(),
            op("PING_MBULK", "PING", random, vec![]),
        ),
        (
            "set",
            "SET".into(),
            op("SET", "SET key:__rand_int__ $data", random, vec![1]),
        ),
        (
            "get",
            "GET".into(),
            op("GET", "GET key:__rand_int__", random, vec![1]),
        ),
        (
            "incr",
            "INCR".into(),
            op("INCR", "INCR counter:__rand_int__", random, vec![1]),
        ),
        ("lpush", "LPUSH".into(), lpush()),
        (
            "rpush",
            "RPUSH".into(),
            op("RPUSH", "RPUSH mylist $data", random, vec![1]),
        ),
        (
            "lpop",
            "LPOP".into(),
            op("LPOP", "LPOP mylist", random, vec![1]),
        ),
        (
            "rpop",
            "RPOP".into(),
            op("RPOP", "RPOP mylist", random, vec![1]),
        ),
        (
            "sadd",
            "SADD".into(),
            op("SADD", "SADD myset element:__rand_int__", random, vec![1]),
        ),
        (
            "hset",
            "HSET".into(),
            op(
                "HSET",
                "HSET myhash element:__rand_int__ $data",
                random,
                vec![1],
            ),
        ),
        (
            "spop",
            "SPOP".into(),
            op("SPOP", "SPOP myset", random, vec![1]),
        ),
        (
            "zadd",
            "ZADD".into(),
            op(
                "ZADD",
                "ZADD myzset 0 element:__rand_int__",
                random,
                vec![1],
            ),
        ),
        (
            "zpopmin",
            "ZPOPMIN".into(),
            op("ZPOPMIN", "ZPOPMIN myzset", random, vec![1]),
        ),
    ];
    let any_lrange = |sel: &[String]| sel.iter().any(|t| t.starts_with("lrange"));
    all.push((
        "lrange",
        "LPUSH (needed to benchmark LRANGE)".into(),
        lpush(),
    ));
    for k in [100, 300, 500, 600] {
        let (name, o) = lrange(k);
        all.push(("lrange", name, o));
    }
    all.push((
        "mset",
        format!("MSET ({n} keys)"),
        multi("MSET", "MSET", n, true, random),
    ));
    all.push((
        "xadd",
        "XADD".into(),
        op("XADD", "XADD mystream * myfield $data", random, vec![1]),
    ));
    // kvik-bench's additions; run only when named.
    let extra: Vec<(&str, String, Op)> = vec![
        (
            "mget",
            format!("MGET ({n} keys)"),
            multi("MGET", "MGET", n, false, random),
        ),
        (
            "hget",
            "HGET".into(),
            op("HGET", "HGET myhash element:__rand_int__", random, vec![1]),
        ),
        (
            "zrange",
            "ZRANGE (first 10)".into(),
            op("ZRANGE", "ZRANGE myzset 0 9", random, vec![1]),
        ),
    ];
    let selected = |key: &str, name: &str| -> bool {
        let Some(sel) = &cfg.tests else {
            return true;
        };
        let lname = name
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        match key {
            "ping_inline" | "ping_mbulk" => sel.iter().any(|t| t == "ping" || t == key),
            "lrange" if name.starts_with("LPUSH") => any_lrange(sel),
            "lrange" => sel.iter().any(|t| t == "lrange" || *t == lname),
            _ => sel.iter().any(|t| t == key),
        }
    };
    let mut out = Vec::new();
    for (key, name, o) in all {
        if selected(key, &name) {
            out.push(Test {
                name,
                ops: vec![(o, 1)],
            });
        }
    }
    if let Some(sel) = &cfg.tests {
        // Named tests run in the order of -t among the additions.
        for t in sel {
            if let Some((_, name, o)) = extra.iter().find(|(k, _, _)| k == t) {
                out.push(Test {
                    name: name.clone(),
                    ops: vec![(o.clone(), 1)],
                });
            }
        }
    }
    out
}

/// Draws key numbers for `__rand_int__`.
#[derive(Debug)]
pub struct KeyGen {
    keyspace: u64,
    dist: Dist,
    zipf: Option<Zipf<f64>>,
    next_seq: u64,
    seq_step: u64,
}

impl KeyGen {
    /// A generator for one thread; sequential keys are interleaved across `threads` threads.
    pub fn new(keyspace: u64, dist: Dist, thread: usize, threads: usize) -> KeyGen {
        let zipf = match dist {
            Dist::Zipf(s) => Some(Zipf::new(keyspace, s).expect("valid zipf parameters")),
            _ => None,
        };
        KeyGen {
            keyspace: keyspace.max(1),
            dist,
            zipf,
            next_seq: thread as u64 % keyspace.max(1),
            seq_step: threads.max(1) as u64,
        }
    }

    /// The next key number in `0..keyspace`.
    pub fn next(&mut self, rng: &mut SmallRng) -> u64 {
        match self.dist {
            Dist::Uniform => rng.gen_range(0..self.keyspace),
            // Zipf samples 1..=n as floats; rank 1 is the hottest key, number 0.
            Dist::Zipf(_) => {
                let v = self.zipf.as_ref().unwrap().sample(rng) as u64;
                v.saturating_sub(1).min(self.keyspace - 1)
            }
            Dist::Seq => {
                let v = self.next_seq;
                self.next_seq = (self.next_seq + self.seq_step) % self.keyspace;
                v
            }
        }
    }
}

/// Writes `n` as 12 zero-padded digits (redis-benchmark's key format), more if it needs them.
fn push_num(out: &mut Vec<u8>, n: u64) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut v = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = i.min(buf.len() - 12);
    out.extend_from_slice(&buf[start..]);
}

fn push_usize(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(n.to_string().as_bytes());
}

/// Size of the random pool `--random-values` cuts values from (per thread).
const RANDOM_POOL_BYTES: usize = 4 << 20;

/// `len` bytes of generated text: records like `name=vakoru id=48213 tags=[tesi,mo] ...` whose
/// words come from a vocabulary of 512 random syllable words with a skewed choice, as field
/// names, enum-like values and repeated words make real records compressible (how much RocksDB's
/// LZ4 and ZSTD shrink it is measured in docs/benchmarks.md, section 41).
pub fn text_pool(len: usize) -> Vec<u8> {
    const SYLLABLES: [&str; 16] = [
        "ka", "ro", "te", "si", "mo", "lu", "va", "ne", "di", "po", "ra", "fe", "gu", "zo", "bi",
        "an",
    ];
    const FIELDS: [&str; 8] = [
        "name", "id", "tags", "city", "score", "state", "owner", "updated",
    ];
    let mut rng = SmallRng::from_entropy();
    let vocabulary: Vec<String> = (0..512)
        .map(|_| {
            (0..rng.gen_range(2..=4))
                .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
                .collect()
        })
        .collect();
    // Skewed: a few words are common, most are rare (the square of a uniform pick).
    let word = |rng: &mut SmallRng| {
        let u: f64 = rng.gen();
        &vocabulary[(u * u * vocabulary.len() as f64) as usize]
    };
    let mut out = Vec::with_capacity(len + 64);
    while out.len() < len {
        let field = FIELDS[rng.gen_range(0..FIELDS.len())];
        out.extend_from_slice(field.as_bytes());
        out.push(b'=');
        match field {
            "id" | "score" | "updated" => push_num(&mut out, rng.gen_range(0..100_000_000)),
            "tags" => {
                out.push(b'[');
                for i in 0..rng.gen_range(1..=3) {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(word(&mut rng).as_bytes());
                }
                out.push(b']');
            }
            _ => out.extend_from_slice(word(&mut rng).as_bytes()),
        }
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Encodes requests from templates into a reusable scratch buffer.
#[derive(Debug)]
pub struct Encoder {
    pub keygen: Option<KeyGen>,
    /// The bytes values are cut from: `data_max` x 'x', or with `--random-values` /
    /// `--text-values` a larger pool of random bytes / generated text from which each value
    /// starts at a random offset.
    pub data: Vec<u8>,
    pub data_min: usize,
    pub data_max: usize,
    /// Cluster mode: multi-key commands share one `{tag}` so their keys hash to one slot.
    pub cluster: bool,
    arg: Vec<u8>,
}

impl Encoder {
    pub fn new(cfg: &Config, thread: usize) -> Encoder {
        Encoder {
            keygen: cfg
                .keyspace
                .map(|r| KeyGen::new(r, cfg.dist, thread, cfg.threads)),
            data: match cfg.values {
                Values::Repeated => vec![b'x'; cfg.data_max],
                Values::Random => {
                    let mut pool = vec![0u8; cfg.data_max.max(RANDOM_POOL_BYTES)];
                    rand::thread_rng().fill(&mut pool[..]);
                    pool
                }
                Values::Text => text_pool(cfg.data_max.max(RANDOM_POOL_BYTES)),
            },
            data_min: cfg.data_min,
            data_max: cfg.data_max,
            cluster: cfg.cluster,
            arg: Vec::new(),
        }
    }

    /// Appends one request for `op` to `out` and returns the byte range of its first key
    /// (for slot routing), if it has one.
    pub fn encode(
        &mut self,
        op: &Op,
        out: &mut Vec<u8>,
        rng: &mut SmallRng,
    ) -> Option<std::ops::Range<usize>> {
        if op.inline {
            for (i, a) in op.args.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                if let Arg::Lit(b) = a {
                    out.extend_from_slice(b);
                }
            }
            out.extend_from_slice(b"\r\n");
            return None;
        }
        let tag = if self.cluster && op.keys.len() > 1 {
            self.keygen.as_mut().map(|g| g.next(rng))
        } else {
            None
        };
        out.push(b'*');
        push_usize(out, op.args.len());
        out.extend_from_slice(b"\r\n");
        let mut first_key = None;
        for (i, a) in op.args.iter().enumerate() {
            self.arg.clear();
            match a {
                Arg::Lit(b) => self.arg.extend_from_slice(b),
                Arg::Data => {
                    let len = if self.data_min == self.data_max {
                        self.data_min
                    } else {
                        rng.gen_range(self.data_min..=self.data_max)
                    };
                    let start = if self.data.len() > len {
                        rng.gen_range(0..=self.data.len() - len)
                    } else {
                        0
                    };
                    self.arg.extend_from_slice(&self.data[start..start + len]);
                }
                Arg::Rand(parts) => {
                    if let (Some(t), true) = (tag, op.keys.contains(&i)) {
                        self.arg.push(b'{');
                        push_num(&mut self.arg, t);
                        self.arg.push(b'}');
                    }
                    for (j, p) in parts.iter().enumerate() {
                        if j > 0 {
                            match self.keygen.as_mut() {
                                Some(g) => push_num(&mut self.arg, g.next(rng)),
                                None => self.arg.extend_from_slice(PLACEHOLDER),
                            }
                        }
                        self.arg.extend_from_slice(p);
                    }
                }
            }
            out.push(b'$');
            push_usize(out, self.arg.len());
            out.extend_from_slice(b"\r\n");
            if first_key.is_none() && op.keys.first() == Some(&i) {
                first_key = Some(out.len()..out.len() + self.arg.len());
            }
            out.extend_from_slice(&self.arg);
            out.extend_from_slice(b"\r\n");
        }
        first_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Config};
    use clap::Parser;
    use rand::SeedableRng;

    fn cfg(args: &[&str]) -> Config {
        let mut v = vec!["kvik-bench"];
        v.extend_from_slice(args);
        Config::from_cli(Cli::try_parse_from(v).unwrap()).unwrap()
    }

    fn names(c: &Config) -> Vec<String> {
        tests_for(c).into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn text_values_are_records_of_repeated_words() {
        let c = cfg(&["--text-values", "-d", "100"]);
        assert_eq!(c.values, Values::Text);
        let mut e = Encoder::new(&c, 0);
        assert_eq!(e.data.len(), RANDOM_POOL_BYTES);
        assert!(e.data.iter().all(|b| b.is_ascii_graphic() || *b == b' '));
        // Compressible the way records are: few distinct words for the text's length.
        let text = String::from_utf8(e.data[..100_000].to_vec()).unwrap();
        let words: std::collections::HashSet<&str> = text
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
            .collect();
        assert!(words.len() < 600, "{} distinct words", words.len());
        let mut out = Vec::new();
        let mut rng = SmallRng::seed_from_u64(1);
        let op = op("SET", "SET k $data", false, vec![1]);
        e.encode(&op, &mut out, &mut rng);
        assert!(out.ends_with(b"\r\n") && out.len() > 100);
        assert!(Cli::try_parse_from(["kvik-bench", "--text-values", "--random-values"]).is_err());
    }

    #[test]
    fn default_tests_follow_redis_benchmark() {
        let n = names(&cfg(&[]));
        assert_eq!(n[0], "PING_INLINE");
        assert_eq!(n[2], "SET");
        assert!(n.contains(&"LRANGE_600 (first 600 elements)".to_string()));
        assert!(n.contains(&"MSET (10 keys)".to_string()));
        assert!(
            !n.iter().any(|t| t.starts_with("MGET")),
            "additions only on request"
        );
        assert_eq!(
            names(&cfg(&["-t", "get,set,mget,hget"])),
            vec!["SET", "GET", "MGET (10 keys)", "HGET"]
        );
        assert_eq!(
            names(&cfg(&["-t", "ping"])),
            vec!["PING_INLINE", "PING_MBULK"]
        );
        assert_eq!(
            names(&cfg(&["-t", "lrange_100"])),
            vec![
                "LPUSH (needed to benchmark LRANGE)",
                "LRANGE_100 (first 100 elements)"
            ]
        );
    }

    fn encode_one(c: &Config, t: usize) -> Vec<u8> {
        let tests = tests_for(c);
        let mut e = Encoder::new(c, 0);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Vec::new();
        e.encode(&tests[t].ops[0].0, &mut out, &mut rng);
        out
    }

    #[test]
    fn rand_int_is_twelve_digits_or_literal_without_r() {
        let c = cfg(&["-n", "1", "SET", "k:__rand_int__:__rand_int__", "v"]);
        assert_eq!(
            encode_one(&c, 0),
            b"*3\r\n$3\r\nSET\r\n$27\r\nk:__rand_int__:__rand_int__\r\n$1\r\nv\r\n"
        );
        let c = cfg(&["-r", "5", "GET", "k:__rand_int__"]);
        let s = String::from_utf8(encode_one(&c, 0)).unwrap();
        let key = s.split("\r\n").nth(4).unwrap();
        assert_eq!(key.len(), 2 + 12);
        assert!(key[2..].parse::<u64>().unwrap() < 5);
        let c = cfg(&["-t", "ping_inline"]);
        assert_eq!(encode_one(&c, 0), b"PING\r\n");
    }

    #[test]
    fn value_sizes_stay_in_range() {
        let c = cfg(&["-t", "set", "-d", "5-9", "-r", "10"]);
        let tests = tests_for(&c);
        let mut e = Encoder::new(&c, 0);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            let mut out = Vec::new();
            e.encode(&tests[0].ops[0].0, &mut out, &mut rng);
            let s = String::from_utf8(out).unwrap();
            let v = s.split("\r\n").nth(6).unwrap();
            assert!((5..=9).contains(&v.len()), "{v}");
            seen.insert(v.len());
        }
        assert_eq!(seen.len(), 5, "every size in the range occurs");
    }

    #[test]
    fn cluster_multi_key_commands_share_a_hash_tag() {
        let c = cfg(&["-t", "mget", "--keys", "3", "-r", "1000", "--cluster"]);
        let s = String::from_utf8(encode_one(&c, 0)).unwrap();
        let keys: Vec<&str> = s.split("\r\n").skip(4).step_by(2).take(3).collect();
        let tag = &keys[0][..14];
        assert!(tag.starts_with('{') && tag.ends_with('}'), "{keys:?}");
        assert!(keys.iter().all(|k| k.starts_with(tag)), "{keys:?}");
    }

    #[test]
    fn ratio_builds_one_mixed_test() {
        let t = tests_for(&cfg(&["--ratio", "3:1", "-r", "10"]));
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "GET/SET 3:1");
        assert_eq!(t[0].ops[0].1, 3);
        let t = tests_for(&cfg(&["--ratio", "1:0", "--keys", "4"]));
        assert_eq!(t[0].name, "MGET/MSET 1:0");
        assert_eq!(t[0].ops.len(), 1);
    }

    fn sample(dist: Dist, n: usize) -> Vec<u64> {
        let mut g = KeyGen::new(1000, dist, 0, 1);
        let mut rng = SmallRng::seed_from_u64(42);
        (0..n).map(|_| g.next(&mut rng)).collect()
    }

    #[test]
    fn uniform_covers_the_keyspace_evenly() {
        let v = sample(Dist::Uniform, 100_000);
        assert!(v.iter().all(|&k| k < 1000));
        let low = v.iter().filter(|&&k| k < 100).count();
        // 10% of the keyspace should get about 10% of the draws.
        assert!((8_000..12_000).contains(&low), "{low}");
    }

    #[test]
    fn zipf_is_skewed_towards_low_keys() {
        let v = sample(Dist::Zipf(0.99), 100_000);
        assert!(v.iter().all(|&k| k < 1000));
        let hottest = v.iter().filter(|&&k| k == 0).count();
        let top10 = v.iter().filter(|&&k| k < 10).count();
        // With s = 0.99 over 1000 keys, key 0 gets ~13% and the top 1% of keys ~39%.
        assert!(hottest > 8_000, "{hottest}");
        assert!(top10 > 30_000, "{top10}");
        let flatter = sample(Dist::Zipf(0.5), 100_000);
        assert!(flatter.iter().filter(|&&k| k < 10).count() < top10);
    }

    #[test]
    fn sequential_walks_and_wraps() {
        let v = sample(Dist::Seq, 2001);
        assert_eq!(&v[..3], &[0, 1, 2]);
        assert_eq!(v[999], 999);
        assert_eq!(v[1000], 0);
        let mut a = KeyGen::new(10, Dist::Seq, 1, 2);
        let mut rng = SmallRng::seed_from_u64(0);
        let got: Vec<u64> = (0..6).map(|_| a.next(&mut rng)).collect();
        assert_eq!(got, vec![1, 3, 5, 7, 9, 1]);
    }
}

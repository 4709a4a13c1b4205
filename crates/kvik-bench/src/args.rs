//! Command line: redis-benchmark's everyday flags with the same meaning, plus kvik-bench's own
//! (key distributions, read:write mix, value size ranges, multi-key commands, duration, target
//! rate, cluster routing, several servers, JSON, plots).
//!
//! `-h` is the host, as in redis-benchmark, so clap's automatic `-h` help is turned off and help
//! is `--help` only. Everything after the flags is an arbitrary command whose `__rand_int__`
//! placeholders take a key number from the chosen distribution (with `-r`), like
//! redis-benchmark's.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{ArgAction, Parser};

/// The raw flags as typed; [`Config::from_cli`] checks them and derives the run's settings.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "kvik-bench",
    version,
    disable_help_flag = true,
    about = "Load generator for Redis-protocol servers (redis-benchmark's flags, HDR percentiles)",
    after_help = "Examples:\n  kvik-bench -t set,get -n 100000 -r 100000 -c 50 -P 16 -q\n  \
                  kvik-bench -r 1000000 --dist zipf --zipf-s 0.99 --ratio 9:1 --duration 30s \
                  --json\n  kvik-bench --rate 20000 --duration 10s -t get -r 100000\n  \
                  kvik-bench -n 1000 -r 100 SET key:__rand_int__ hello"
)]
pub struct Cli {
    /// Print help.
    #[arg(long = "help", action = ArgAction::Help)]
    pub help: Option<bool>,
    /// Server hostname; a comma-separated list means several servers (clients are spread over
    /// them).
    #[arg(short = 'h', long = "host", default_value = "127.0.0.1")]
    pub host: String,
    /// Server port (for every host of -h).
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    pub port: u16,
    /// Servers as host:port,host:port (overrides -h/-p).
    #[arg(long = "servers")]
    pub servers: Option<String>,
    /// Password for AUTH.
    #[arg(short = 'a')]
    pub password: Option<String>,
    /// Username for AUTH (with -a).
    #[arg(long = "user")]
    pub user: Option<String>,
    /// SELECT this database number.
    #[arg(long = "dbnum", default_value_t = 0)]
    pub dbnum: u32,
    /// Number of parallel connections.
    #[arg(short = 'c', default_value_t = 50)]
    pub clients: usize,
    /// Total number of requests per test (default 100000; with --duration, unlimited).
    #[arg(short = 'n')]
    pub requests: Option<u64>,
    /// Use random keys in [0, keyspacelen) for __rand_int__ (12 digits, zero-padded).
    #[arg(short = 'r')]
    pub keyspace: Option<u64>,
    /// Value size in bytes, or a range MIN-MAX (uniform) for SET/MSET/... values.
    #[arg(short = 'd', default_value = "3")]
    pub data_size: String,
    /// Values of random bytes, different for every request: incompressible, so a storage
    /// engine keeps them raw (the default repeats 'x', which compresses to almost nothing;
    /// `--text-values` compresses like typical application data).
    #[arg(long, conflicts_with = "text_values")]
    pub random_values: bool,
    /// Values cut from generated text (words, numbers, punctuation) that LZ4 and ZSTD compress
    /// about as well as typical application data (2-4x): what a storage engine's block
    /// compression meets in practice, which neither `x` repeated nor random bytes show.
    #[arg(long)]
    pub text_values: bool,
    /// Pipeline <numreq> requests (closed loop: send a batch, wait for all its replies).
    #[arg(short = 'P', default_value_t = 1)]
    pub pipeline: usize,
    /// Only run the comma-separated list of tests (names as in redis-benchmark; also mget,
    /// hget, zrange).
    #[arg(short = 't')]
    pub tests: Option<String>,
    /// Quiet: one line per test.
    #[arg(short = 'q', action = ArgAction::SetTrue)]
    pub quiet: bool,
    /// Output in CSV format (redis-benchmark's columns).
    #[arg(long = "csv", action = ArgAction::SetTrue)]
    pub csv: bool,
    /// Output one JSON document for machines.
    #[arg(long = "json", action = ArgAction::SetTrue)]
    pub json: bool,
    /// Number of client threads, each with its own event loop (0 or 1: one thread).
    #[arg(long = "threads", default_value_t = 1)]
    pub threads: usize,
    /// Show server errors (kvik-bench always counts them and prints samples on stderr).
    #[arg(short = 'e', action = ArgAction::SetTrue)]
    pub show_errors: bool,
    /// Loop forever: refused, every kvik-bench run is bounded (use --duration).
    #[arg(short = 'l', action = ArgAction::SetTrue)]
    pub forever: bool,
    /// Keep alive: only 1 is supported (a new connection per request is not).
    #[arg(short = 'k', default_value_t = 1)]
    pub keepalive: u8,
    /// Decimal places of latency output (default 3).
    #[arg(long = "precision", default_value_t = 3)]
    pub precision: usize,
    /// Cluster mode: slot map from CLUSTER SLOTS, keys routed by CRC16 slot, MOVED followed.
    #[arg(long = "cluster", action = ArgAction::SetTrue)]
    pub cluster: bool,
    /// Key distribution for __rand_int__: uniform, zipf or seq (sequential).
    #[arg(long = "dist", default_value = "uniform")]
    pub dist: String,
    /// Zipf skew exponent (with --dist zipf).
    #[arg(long = "zipf-s", default_value_t = 0.99)]
    pub zipf_s: f64,
    /// Read:write mix, e.g. 9:1: one test mixing GET and SET (MGET and MSET with --keys > 1).
    #[arg(long = "ratio")]
    pub ratio: Option<String>,
    /// Keys per multi-key command (MGET, MSET); default 10 as redis-benchmark's MSET.
    #[arg(long = "keys")]
    pub keys: Option<usize>,
    /// Run each test for this long instead of a request count (e.g. 30, 30s, 500ms, 2m).
    #[arg(long = "duration")]
    pub duration: Option<String>,
    /// Target rate in requests/s over all connections (open loop: latency is measured from
    /// the intended send time, so a slow server cannot hide its queueing).
    #[arg(long = "rate")]
    pub rate: Option<f64>,
    /// Seed of the key and value generators (default: random).
    #[arg(long = "seed")]
    pub seed: Option<u64>,
    /// Draw an SVG plot from a suite summary JSON file instead of running (see bench/lib.sh).
    #[arg(long = "plot")]
    pub plot: Option<String>,
    /// Draw a time series (CSV lines "seconds,rss_kib,commands_total,phase", as bench/scale.sh
    /// samples a server) as SVG instead of running: RSS and commands per second over time.
    #[arg(long = "plot-series")]
    pub plot_series: Option<String>,
    /// Title of a --plot-series plot.
    #[arg(long = "plot-title", default_value = "server over time")]
    pub plot_title: String,
    /// Output file of --plot and --plot-series.
    #[arg(long = "plot-out", default_value = "plot.svg")]
    pub plot_out: String,
    /// Arbitrary command to run instead of the tests (after the flags).
    #[arg(trailing_var_arg = true, num_args = 0..)]
    pub command: Vec<String>,
}

/// How `__rand_int__` picks a key number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Every key equally likely (redis-benchmark's -r).
    Uniform,
    /// Zipf with exponent `s`: key 0 is the hottest.
    Zipf(f64),
    /// 0, 1, 2, ... wrapping at the keyspace.
    Seq,
}

/// What stops a test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// After this many requests in total.
    Count(u64),
    /// After this long (and after this many requests, if a count was also given).
    Time(Duration, Option<u64>),
}

/// What values (`$data`, `-d`) are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// `x` repeated, as redis-benchmark sends (compresses to almost nothing).
    Repeated,
    /// Random bytes (`--random-values`: incompressible).
    Random,
    /// Generated text (`--text-values`: compresses like typical application data).
    Text,
}

/// A checked run configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub servers: Vec<SocketAddr>,
    pub password: Option<String>,
    pub user: Option<String>,
    pub dbnum: u32,
    pub clients: usize,
    pub stop: Stop,
    pub keyspace: Option<u64>,
    pub data_min: usize,
    pub data_max: usize,
    pub values: Values,
    pub pipeline: usize,
    pub tests: Option<Vec<String>>,
    pub quiet: bool,
    pub csv: bool,
    pub json: bool,
    pub threads: usize,
    pub precision: usize,
    pub cluster: bool,
    pub dist: Dist,
    pub ratio: Option<(u32, u32)>,
    pub keys: usize,
    /// Keys per command of the read:write mix: 1 (GET/SET) unless --keys is given.
    pub mix_keys: usize,
    pub rate: Option<f64>,
    pub seed: Option<u64>,
    pub command: Vec<String>,
}

/// Parses "30", "30s", "500ms", "2m" into a duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration '{s}' (e.g. 30, 30s, 500ms, 2m)"))?;
    if !(v > 0.0 && v * mult <= 86_400.0) {
        return Err(format!("duration '{s}' must be positive and at most a day"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Parses "N" or "MIN-MAX" value sizes.
pub fn parse_size_range(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("invalid data size '{s}' (N or MIN-MAX bytes)");
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (a, b),
        None => (s, s),
    };
    let a: usize = a.trim().parse().map_err(|_| bad())?;
    let b: usize = b.trim().parse().map_err(|_| bad())?;
    if a > b || b > 512 * 1024 * 1024 {
        return Err(bad());
    }
    Ok((a, b))
}

/// Parses "R:W" with R + W > 0.
pub fn parse_ratio(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("invalid ratio '{s}' (READS:WRITES, e.g. 9:1)");
    let (r, w) = s.split_once(':').ok_or_else(bad)?;
    let r: u32 = r.trim().parse().map_err(|_| bad())?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    if r == 0 && w == 0 {
        return Err(bad());
    }
    Ok((r, w))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {host}:{port}"))
}

fn parse_hostport(s: &str) -> Result<SocketAddr, String> {
    let (h, p) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("server '{s}' must be host:port"))?;
    let port: u16 = p.parse().map_err(|_| format!("bad port in '{s}'"))?;
    resolve(h.trim_start_matches('[').trim_end_matches(']'), port)
}

impl Config {
    /// Checks the flags and builds the configuration.
    pub fn from_cli(cli: Cli) -> Result<Config, String> {
        let servers: Vec<SocketAddr> = match &cli.servers {
            Some(list) => list
                .split(',')
                .filter(|s| !s.is_empty())
                .map(parse_hostport)
                .collect::<Result<_, _>>()?,
            None => cli
                .host
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|h| resolve(h, cli.port))
                .collect::<Result<_, _>>()?,
        };
        if servers.is_empty() {
            return Err("no server given".into());
        }
        if cli.clients == 0 {
            return Err("-c must be at least 1".into());
        }
        if cli.pipeline == 0 {
            return Err("-P must be at least 1".into());
        }
        if cli.forever {
            return Err(
                "-l (loop forever) is not supported: runs are bounded, use --duration".into(),
            );
        }
        if cli.keepalive != 1 {
            return Err("only -k 1 (keep alive) is supported".into());
        }
        let duration = cli.duration.as_deref().map(parse_duration).transpose()?;
        let stop = match (duration, cli.requests) {
            (Some(d), n) => Stop::Time(d, n),
            (None, Some(0)) => return Err("-n must be at least 1".into()),
            (None, n) => Stop::Count(n.unwrap_or(100_000)),
        };
        let (data_min, data_max) = parse_size_range(&cli.data_size)?;
        let dist = match cli.dist.as_str() {
            "uniform" => Dist::Uniform,
            "zipf" => {
                if !(cli.zipf_s > 0.0 && cli.zipf_s.is_finite()) {
                    return Err("--zipf-s must be a positive number".into());
                }
                Dist::Zipf(cli.zipf_s)
            }
            "seq" | "sequential" => Dist::Seq,
            other => return Err(format!("unknown --dist '{other}' (uniform, zipf, seq)")),
        };
        // A distribution other than redis-benchmark's uniform implies random keys.
        let keyspace = match (cli.keyspace, dist) {
            (Some(0), _) => return Err("-r must be at least 1".into()),
            (Some(r), _) => Some(r),
            (None, Dist::Uniform) => None,
            (None, _) => Some(100_000),
        };
        let ratio = cli.ratio.as_deref().map(parse_ratio).transpose()?;
        let keys = cli.keys.unwrap_or(10);
        if keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        if let Some(r) = cli.rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err("--rate must be a positive number of requests per second".into());
            }
        }
        let tests = cli.tests.as_ref().map(|t| {
            t.split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        });
        Ok(Config {
            servers,
            password: cli.password,
            user: cli.user,
            dbnum: cli.dbnum,
            clients: cli.clients,
            stop,
            keyspace,
            data_min,
            data_max,
            values: if cli.random_values {
                Values::Random
            } else if cli.text_values {
                Values::Text
            } else {
                Values::Repeated
            },
            pipeline: cli.pipeline,
            tests,
            quiet: cli.quiet,
            csv: cli.csv,
            json: cli.json,
            threads: cli.threads.max(1).min(cli.clients),
            precision: cli.precision.min(6),
            cluster: cli.cluster,
            dist,
            ratio,
            keys,
            mix_keys: cli.keys.unwrap_or(1),
            rate: cli.rate,
            seed: cli.seed,
            command: cli.command,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut v = vec!["kvik-bench"];
        v.extend_from_slice(args);
        let cli = Cli::try_parse_from(v).map_err(|e| e.to_string())?;
        Config::from_cli(cli)
    }

    #[test]
    fn redis_benchmark_flags_mean_the_same() {
        let c = parse(&[
            "-h",
            "127.0.0.1",
            "-p",
            "7000",
            "-a",
            "pw",
            "-c",
            "20",
            "-n",
            "5000",
            "-r",
            "1000",
            "-d",
            "64",
            "-P",
            "16",
            "-t",
            "set,GET",
            "-q",
            "--csv",
            "--threads",
            "2",
        ])
        .unwrap();
        assert_eq!(c.servers, vec!["127.0.0.1:7000".parse().unwrap()]);
        assert_eq!(c.password.as_deref(), Some("pw"));
        assert_eq!(c.clients, 20);
        assert_eq!(c.stop, Stop::Count(5000));
        assert_eq!(c.keyspace, Some(1000));
        assert_eq!((c.data_min, c.data_max), (64, 64));
        assert_eq!(c.pipeline, 16);
        assert_eq!(c.tests, Some(vec!["set".to_string(), "get".to_string()]));
        assert!(c.quiet && c.csv);
        assert_eq!(c.threads, 2);
        assert!(c.command.is_empty());
    }

    #[test]
    fn defaults_match_redis_benchmark() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.clients, 50);
        assert_eq!(c.stop, Stop::Count(100_000));
        assert_eq!(c.keyspace, None);
        assert_eq!((c.data_min, c.data_max), (3, 3));
        assert_eq!(c.pipeline, 1);
        assert_eq!(c.servers, vec!["127.0.0.1:6379".parse().unwrap()]);
    }

    #[test]
    fn command_after_flags_is_kept_whole() {
        let c = parse(&["-n", "10", "-P16", "SET", "k:__rand_int__", "-v", "x"]).unwrap();
        assert_eq!(c.pipeline, 16);
        assert_eq!(c.command, vec!["SET", "k:__rand_int__", "-v", "x"]);
    }

    #[test]
    fn several_servers_two_ways() {
        let c = parse(&["-h", "127.0.0.1,localhost", "-p", "7001"]).unwrap();
        assert_eq!(c.servers.len(), 2);
        assert!(c.servers.iter().all(|a| a.port() == 7001));
        let c = parse(&["--servers", "127.0.0.1:1,127.0.0.1:2"]).unwrap();
        assert_eq!(c.servers[1].port(), 2);
        assert!(parse(&["--servers", "127.0.0.1"]).is_err());
    }

    #[test]
    fn extensions_parse_and_are_checked() {
        let c = parse(&[
            "--dist",
            "zipf",
            "--zipf-s",
            "1.2",
            "--ratio",
            "9:1",
            "-d",
            "10-100",
            "--keys",
            "4",
            "--duration",
            "500ms",
            "--rate",
            "1000",
        ])
        .unwrap();
        assert_eq!(c.dist, Dist::Zipf(1.2));
        assert_eq!(c.keyspace, Some(100_000), "zipf implies random keys");
        assert_eq!(c.ratio, Some((9, 1)));
        assert_eq!((c.data_min, c.data_max), (10, 100));
        assert_eq!(c.keys, 4);
        assert_eq!(c.stop, Stop::Time(Duration::from_millis(500), None));
        assert_eq!(c.rate, Some(1000.0));
        for bad in [
            &["--dist", "pareto"][..],
            &["--ratio", "9"],
            &["--ratio", "0:0"],
            &["-d", "10-5"],
            &["--duration", "-1"],
            &["--rate", "0"],
            &["-c", "0"],
            &["-P", "0"],
            &["-n", "0"],
            &["-k", "0"],
            &["-l"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("0").is_err());
    }
}

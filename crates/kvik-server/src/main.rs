//! The kvik-server binary: `kvik-server [config-file] [--name value ...]`, as redis-server.

use clap::{Arg, ArgAction, Command};
use kvik_server::config::{Config, Param};
use std::process::ExitCode;

/// jemalloc's start-up options. RocksDB links jemalloc in as the process allocator, which reads
/// this symbol before its first allocation (`MALLOC_CONF` in the environment overrides it, the
/// switch for an experiment). One arena per CPU, each thread allocating in the arena of the CPU
/// it runs on, instead of jemalloc's default of four arenas per CPU handed out by thread: the
/// pages one thread frees are the pages the next thread on that core allocates from, where eight
/// arenas on two cores each held freed pages of their own (docs/benchmarks.md section 25).
#[no_mangle]
pub static malloc_conf: &[u8; 20] = b"percpu_arena:percpu\0";

/// The command line is generated from the parameter tables: every parameter (and alias) is a
/// `--name value` flag.
fn cli() -> Command {
    let mut cmd = Command::new("kvik-server")
        .version(env!("CARGO_PKG_VERSION"))
        .about("kvik: a Redis-protocol key-value server on RocksDB")
        .after_help(
            "Settings given as flags override the config file, which overrides the defaults.",
        )
        .arg(
            Arg::new("config-file")
                .help("redis.conf-style file: one `name value` per line")
                .value_name("CONFIG-FILE"),
        )
        .arg(
            Arg::new("restore-from")
                .long("restore-from")
                .value_name("CHECKPOINT")
                .help(
                    "start from a copy of this checkpoint (a directory SAVE or BGSAVE wrote); \
                     `dir` must not hold a database yet",
                )
                .action(ArgAction::Set),
        );
    for (name, p) in Param::all() {
        cmd = cmd.arg(
            Arg::new(name)
                .long(name)
                .value_name("VALUE")
                .help(format!("{} [default: {:?}]", p.help(), p.default_value()))
                .action(ArgAction::Set)
                .allow_hyphen_values(true),
        );
    }
    cmd
}

/// The configuration, and the checkpoint to start from (`--restore-from`).
fn load_config() -> Result<(Config, Option<String>), String> {
    let matches = cli().get_matches();
    let config = Config::default();
    if let Some(path) = matches.get_one::<String>("config-file") {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {path}: {e}"))?;
        config
            .load_file(&text)
            .map_err(|e| format!("config file {path}: {e}"))?;
        // Absolute, as Redis keeps it: CONFIG REWRITE writes here whatever the working directory.
        let absolute = std::path::absolute(path).map_err(|e| format!("config file {path}: {e}"))?;
        *config.config_file.write() = Some(absolute);
    }
    for (name, _) in Param::all() {
        if let Some(v) = matches.get_one::<String>(name) {
            config.apply(name, v)?;
        }
    }
    Ok((config, matches.get_one::<String>("restore-from").cloned()))
}

fn main() -> ExitCode {
    let (config, restore_from) = match load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvik-server: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = kvik_server::logging::init(&config.loglevel.read(), &config.logfile.read()) {
        eprintln!("kvik-server: {e}");
        return ExitCode::from(1);
    }
    if let Some(from) = restore_from {
        let dir = config.dir.read().clone();
        if let Err(e) = kvik_server::storage::checkpoint::restore(from.as_ref(), &dir) {
            tracing::error!("cannot restore from {from}: {e}");
            eprintln!("kvik-server: cannot restore from {from}: {e}");
            return ExitCode::from(1);
        }
        tracing::info!("restored {} from checkpoint {from}", dir.display());
    }
    match kvik_server::startup::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("kvik-server: {e}");
            ExitCode::from(1)
        }
    }
}

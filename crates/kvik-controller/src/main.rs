//! The kvik-controller binary: logs to stderr (RUST_LOG filters, default info), then runs
//! [`kvik_controller::main_with`].

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().collect();
    let code = kvik_controller::main_with(&args, &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}

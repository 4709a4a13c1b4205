//! `kvik-cluster`: the admin command line of a kvik cluster (see the library docs).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = kvik_cluster::run(&args, &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}

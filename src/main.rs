use clap::Parser;

fn main() {
    let cli = amtool::cli::Cli::parse();
    std::process::exit(amtool::cli::run(cli));
}

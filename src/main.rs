fn main() {
    std::process::exit(amtool::cli::main_with_args(std::env::args_os().collect()));
}

fn main() {
    amtool::timeline::start();
    let status = amtool::cli::main_with_args(std::env::args_os().collect());
    amtool::timeline::report();
    amtool::engine::batch_trace::flush();
    std::process::exit(status);
}
